"""Build the configured provider, importing only its SDK."""

from __future__ import annotations

from agent.llm.base import LLMProvider
from agent.llm.diagnose import not_configured
from agent.llm.errors import LLMNotConfigured
from agent.llm.sight import Sight
from gateway.config.settings import LLMSettings


def provider_module(settings: LLMSettings) -> str:
    """The module (and so the SDK) a provider setting needs."""
    if settings.provider == "anthropic":
        return "agent.llm.anthropic_provider"
    return "agent.llm.openai_provider"


def configuration_problem(settings: LLMSettings, setting: str = "llm") -> LLMNotConfigured | None:
    """Why no model call can work, known without a request: no key and no base URL.

    The hosted APIs need a key and a local server needs its URL; with neither a call could
    only fail, after the SDK's retries, with a misleading "timed out".
    """
    if settings.base_url is None and settings.resolved_api_key() is None:
        return not_configured(settings.provider, setting)
    return None


def create_provider(
    settings: LLMSettings, *, setting: str = "llm", sight: Sight | None = None
) -> LLMProvider:
    """The configured provider; raises :class:`LLMNotConfigured` when nothing is set.
    ``setting`` says where the model is configured (``llm``, ``llm.fallbacks[0]``,
    ``agents.coder``): its errors name the settings to fix there. ``sight``: whether it is
    shown pictures, shared with whoever asks (else its own, from ``settings.vision``)."""
    if (problem := configuration_problem(settings, setting)) is not None:
        raise problem
    key = settings.resolved_api_key()
    api_key = key.get_secret_value() if key else None
    sight = sight or Sight(settings.vision)
    if settings.provider == "anthropic":
        from agent.llm.anthropic_provider import AnthropicProvider  # noqa: PLC0415 - lazy SDK

        return AnthropicProvider(
            model=settings.model,
            api_key=api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
            sight=sight,
            setting=setting,
        )
    from agent.llm.openai_provider import OpenAIProvider  # noqa: PLC0415 - lazy SDK

    return OpenAIProvider(
        model=settings.model,
        api_key=api_key,
        base_url=settings.base_url,
        timeout=settings.timeout_seconds,
        max_retries=settings.max_retries,
        sight=sight,
        setting=setting,
    )
