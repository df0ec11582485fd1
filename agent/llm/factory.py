"""Build the configured provider, importing only its SDK."""

from __future__ import annotations

from agent.llm.base import LLMProvider
from gateway.config.settings import LLMSettings


def provider_module(settings: LLMSettings) -> str:
    """The module (and so the SDK) a provider setting needs."""
    if settings.provider == "anthropic":
        return "agent.llm.anthropic_provider"
    return "agent.llm.openai_provider"


def create_provider(settings: LLMSettings) -> LLMProvider:
    key = settings.resolved_api_key()
    api_key = key.get_secret_value() if key else None
    if settings.provider == "anthropic":
        from agent.llm.anthropic_provider import AnthropicProvider  # noqa: PLC0415 - lazy SDK

        return AnthropicProvider(
            model=settings.model,
            api_key=api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
            vision=settings.vision,
        )
    from agent.llm.openai_provider import OpenAIProvider  # noqa: PLC0415 - lazy SDK

    return OpenAIProvider(
        model=settings.model,
        api_key=api_key,
        base_url=settings.base_url,
        timeout=settings.timeout_seconds,
        max_retries=settings.max_retries,
        vision=settings.vision,
    )
