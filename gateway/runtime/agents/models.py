"""The gateway's models: one provider per configured model, shared by every agent that
names it, each behind its endpoint's concurrency cap, and the fallback chains over them
(``llm.fallbacks``, see :mod:`agent.llm.fallback`); their prices and what their providers
counted, shared by every agent too.

A wiring module: it knows the agent's LLM package so the rest of the gateway does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from agent.llm.base import LLMProvider
from agent.llm.fallback import Candidate, Cooldowns, FallbackChain, Seconds, Tracked
from agent.llm.lazy import LazyProvider
from agent.llm.reconcile import Reconciler
from agent.llm.sight import Sight
from agent.llm.slots import EndpointSlots
from gateway.config.llm import DEFAULT_URLS, LLMSettings
from gateway.config.prices import PriceTable
from gateway.core.urls import shown_url
from gateway.web.view import ModelState


def endpoint(llm: LLMSettings) -> str:
    """Which model server a provider setting talks to (one concurrency cap each)."""
    return f"{llm.provider} {_server(llm)}"


def model_label(llm: LLMSettings) -> str:
    """A model as the trace, the log, the status and the cooldowns name it."""
    return f"{llm.provider} {llm.model} at {_server(llm)}"


def _server(llm: LLMSettings) -> str:
    """The model's server, without the user name and password its URL may carry."""
    return shown_url((llm.base_url or DEFAULT_URLS[llm.provider]).rstrip("/"))


def _identity(llm: LLMSettings) -> tuple[object, ...]:
    """What a provider is made from (agent/llm/factory.py): a change to any of it is
    another provider."""
    key = llm.api_key.get_secret_value() if llm.api_key is not None else ""
    return (
        llm.provider,
        llm.base_url or "",
        llm.model,
        key,
        llm.timeout_seconds,
        llm.max_retries,
        llm.vision,
    )


class ModelPool:
    """Providers by model, created on first use; the cooldowns every chain shares (a model
    that is down is down for every agent)."""

    def __init__(
        self,
        slots: EndpointSlots,
        *,
        cooldown_seconds: float,
        clock: Seconds = time.time,
        prices: PriceTable | None = None,
    ) -> None:
        self.slots = slots
        self.cooldowns = Cooldowns(cooldown_seconds, clock=clock)
        self.prices = prices or PriceTable()  # [llm.prices] over the shipped table
        self.reconciler = Reconciler()  # our token counts beside the providers'
        self._providers: dict[tuple[object, ...], LLMProvider] = {}
        self._sights: dict[tuple[object, ...], Sight] = {}  # whether each is shown pictures
        self._main: tuple[object, ...] | None = None  # the gateway's model (``llm``)
        # Every model an agent uses, by label: its display name, the name its provider
        # knows it by and where it is configured.
        self._used: dict[str, tuple[str, str, list[str]]] = {}

    def recount(self) -> Callable[[], None]:
        """Count the models in use afresh: the agents are being built again (a changed
        configuration). Returns what puts the earlier count back, for a build that failed.
        Providers stay: a running turn may still use one, and a model named again reuses
        its provider."""
        earlier, main, self._used = self._used, self._main, {}

        def restore() -> None:
            self._used, self._main = earlier, main

        return restore

    def _use(self, llm: LLMSettings, setting: str) -> str:
        label = model_label(llm)
        *_, settings = self._used.setdefault(
            label, (f"{llm.model} ({llm.provider})", llm.model, [])
        )
        if setting not in settings:
            settings.append(setting)
        return label

    def provider(
        self, llm: LLMSettings, given: LLMProvider | None = None, *, setting: str = "llm"
    ) -> LLMProvider:
        """The provider of a model (``given`` becomes it if it has none yet); ``setting``
        is where the model is configured, which its errors name (``llm.fallbacks[1]``)."""
        identity = _identity(llm.model_copy(update={"fallbacks": ()}))
        if identity not in self._providers:
            sight = self._sights[identity] = Sight(llm.vision)
            self._providers[identity] = given or LazyProvider(llm, setting=setting, sight=sight)
        if setting == "llm":
            self._main = identity
        return self._providers[identity]

    def sees_pictures(self) -> bool:
        """Whether the gateway's model is shown pictures now: ``llm.vision`` as configured
        now, unless its server has refused a request with pictures since (the intake reads
        their words by OCR for a model that sees none)."""
        sight = self._sights.get(self._main) if self._main is not None else None
        return sight is None or sight.sees

    def model(
        self,
        llm: LLMSettings,
        primary: LLMProvider,
        *,
        setting: str = "llm",
        fallbacks_at: str = "llm",
    ) -> LLMProvider:
        """``primary`` (configured at ``setting``) on its own, or a chain over it and
        ``llm.fallbacks`` (configured at ``{fallbacks_at}.fallbacks``: ``llm``, or an
        agent's own ``agents.<name>``). Either reports its answers to the cooldowns."""
        label = self._use(llm, setting)
        if not llm.fallbacks:
            return Tracked(primary, label, self.cooldowns)
        candidates = [Candidate(primary, label, self.slots.for_endpoint(endpoint(llm)))]
        for index, f in enumerate(llm.fallback_settings()):
            at = f"{fallbacks_at}.fallbacks[{index}]"
            candidates.append(
                Candidate(
                    self.provider(f, setting=at),
                    self._use(f, at),
                    self.slots.for_endpoint(endpoint(f)),
                )
            )
        return FallbackChain(candidates, self.cooldowns)

    def states(self) -> list[ModelState]:
        """Every model in use, in the order the agents named them (the primary first)."""
        out = []
        for label, (name, model, settings) in self._used.items():
            health = self.cooldowns.health(label)
            out.append(
                ModelState(
                    name,
                    label,
                    tuple(settings),
                    health.answered_last,
                    health.last_answer_at,
                    health.cooling_until,
                    health.last_error,
                    priced=self.prices.price(model) is not None,
                )
            )
        return out

    def providers(self) -> list[LLMProvider]:
        return list(self._providers.values())


def model_lines(states: list[ModelState], *, now: float) -> list[str]:
    """``/status`` lines about the models when there is more than one (or one cools down):
    which answered last, which sit out a cooldown and until when."""
    if len(states) < 2 and not any(s.cooling_until for s in states):
        return []
    lines = []
    for state in states:
        if state.cooling_until is not None:
            until = datetime.fromtimestamp(state.cooling_until, UTC).strftime("%H:%M:%S UTC")
            left = max(1, round(state.cooling_until - now))
            line = f"cooling down until {until} ({left} s more)"
            if state.last_error:
                line += f" after: {state.last_error}"
        elif state.answered_last and state.last_answer_at is not None:
            at = datetime.fromtimestamp(state.last_answer_at, UTC).strftime("%H:%M:%S UTC")
            line = f"answered last, at {at}"
        else:
            line = "ready"
        lines.append(f"Model {state.name} [{', '.join(state.settings)}]: {line}")
    return lines
