"""The gateway's models: one provider per configured model, shared by every agent that
names it, each behind its endpoint's concurrency cap, and the fallback chains over them
(``llm.fallbacks``, see :mod:`agent.llm.fallback`).

A wiring module: it knows the agent's LLM package so the rest of the gateway does not.
"""

from __future__ import annotations

import time

from agent.llm.base import LLMProvider
from agent.llm.fallback import Candidate, Cooldowns, FallbackChain, Seconds
from agent.llm.lazy import LazyProvider
from agent.llm.metered import EndpointSlots
from gateway.config.llm import DEFAULT_URLS, LLMSettings


def endpoint(llm: LLMSettings) -> str:
    """Which model server a provider setting talks to (one concurrency cap each)."""
    return f"{llm.provider} {(llm.base_url or DEFAULT_URLS[llm.provider]).rstrip('/')}"


def model_label(llm: LLMSettings) -> str:
    """A model as the trace, the log and the cooldowns name it."""
    return (
        f"{llm.provider} {llm.model} at {(llm.base_url or DEFAULT_URLS[llm.provider]).rstrip('/')}"
    )


def _identity(llm: LLMSettings) -> tuple[str, ...]:
    key = llm.api_key.get_secret_value() if llm.api_key is not None else ""
    return (llm.provider, llm.base_url or "", llm.model, key)


class ModelPool:
    """Providers by model, created on first use; the cooldowns every chain shares (a model
    that is down is down for every agent)."""

    def __init__(
        self, slots: EndpointSlots, *, cooldown_seconds: float, clock: Seconds = time.monotonic
    ) -> None:
        self.slots = slots
        self.cooldowns = Cooldowns(cooldown_seconds, clock=clock)
        self._providers: dict[tuple[str, ...], LLMProvider] = {}

    def provider(
        self, llm: LLMSettings, given: LLMProvider | None = None, *, setting: str = "llm"
    ) -> LLMProvider:
        """The provider of a model (``given`` becomes it if it has none yet); ``setting``
        is where the model is configured, which its errors name (``llm.fallbacks[1]``)."""
        identity = _identity(llm.model_copy(update={"fallbacks": ()}))
        if identity not in self._providers:
            self._providers[identity] = given or LazyProvider(llm, setting=setting)
        return self._providers[identity]

    def model(
        self, llm: LLMSettings, primary: LLMProvider, *, fallbacks_at: str = "llm"
    ) -> LLMProvider:
        """``primary`` on its own, or a chain over it and ``llm.fallbacks`` (configured at
        ``{fallbacks_at}.fallbacks``: ``llm``, or an agent's own ``agents.<name>``)."""
        if not llm.fallbacks:
            return primary
        candidates = [Candidate(primary, model_label(llm), self.slots.for_endpoint(endpoint(llm)))]
        candidates.extend(
            Candidate(
                self.provider(f, setting=f"{fallbacks_at}.fallbacks[{index}]"),
                model_label(f),
                self.slots.for_endpoint(endpoint(f)),
            )
            for index, f in enumerate(llm.fallback_settings())
        )
        return FallbackChain(candidates, self.cooldowns)

    def providers(self) -> list[LLMProvider]:
        return list(self._providers.values())
