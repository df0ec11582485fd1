"""Fallback models: when a model fails a call for a passing reason, the next one answers.

A :class:`FallbackChain` is an :class:`~agent.llm.base.LLMProvider` over the configured
models, primary first (``llm.fallbacks``). Each call goes to the first model that is not
cooling down:

- a **transient** failure (no connection, timeout, 5xx, overload, 429 after the SDK's
  Retry-After retries, a 200 that is no answer: a web page at the base URL) moves the same request on to the next model, and the failed model
  sits out ``llm.fallback_cooldown_seconds`` (at least its Retry-After): later calls, in
  this turn and the next ones, go straight to the next model until the cooldown passes;
- a **refused key, a 404 or a rejected request from the primary** is a setting to fix, not
  an outage: it is raised at once with its precise reason, no fallback is tried (a
  fallback that fails so is skipped like an outage, and cools down);
- a **context overflow** is raised wherever it happens: the turn compacts and asks again.

When every model is cooling down they are tried anyway, in order: a call is never refused
without asking anyone. The history is provider-neutral (:mod:`agent.llm.types`), so a turn
that began on Anthropic with tool calls continues on an OpenAI-compatible model (and back);
each provider converts it to its own wire format. Which model answered and what was
skipped travel with the response (the turn's trace, the usage table).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from agent.llm.base import LLMProvider, TextSink
from agent.llm.errors import LLMAllModelsFailed, LLMContextOverflow, LLMError, LLMRateLimited
from agent.llm.slots import ModelSlots
from agent.llm.types import Failover, LLMRequest, LLMResponse

log = logging.getLogger(__name__)

Seconds = Callable[[], float]  # the current time in seconds (injectable for tests)


@dataclass(frozen=True, slots=True)
class ModelHealth:
    """What the gateway knows of one model lately (for ``/status``, the status page, metrics)."""

    key: str  # the model's label
    cooling_until: float | None  # the clock's seconds; None: not cooling down
    last_answer_at: float | None
    last_error: str | None  # why it last failed over (kept while it cools down)
    answered_last: bool  # the latest answer of any model came from this one


class Cooldowns:
    """Which models sit out after a failure, shared by every chain of the gateway (a model
    that is down is down for every agent), and which model answered last."""

    def __init__(self, seconds: float, *, clock: Seconds) -> None:
        self.seconds = seconds
        self._clock = clock
        self._until: dict[str, float] = {}
        self._errors: dict[str, str] = {}
        self._answered: dict[str, float] = {}
        self._last: str | None = None

    def cooling(self, key: str) -> bool:
        until = self._until.get(key)
        return until is not None and self._clock() < until

    def failed(self, key: str, retry_after: float | None = None, reason: str = "") -> None:
        wait = max(self.seconds, retry_after or 0.0)
        if wait > 0:
            self._until[key] = self._clock() + wait
        if reason:
            self._errors[key] = reason

    def recovered(self, key: str) -> None:
        """``key`` answered: it no longer cools down and is the model that answered last."""
        self._until.pop(key, None)
        self._errors.pop(key, None)
        self._answered[key] = self._clock()
        self._last = key

    def health(self, key: str) -> ModelHealth:
        cooling = self.cooling(key)
        return ModelHealth(
            key,
            self._until[key] if cooling else None,
            self._answered.get(key),
            self._errors.get(key),
            self._last == key,
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """One model of a chain, behind its endpoint's concurrency cap."""

    provider: LLMProvider
    label: str  # "openai gpt-4o at https://api.openai.com/v1": the cooldown key, the trace
    slots: ModelSlots | None = None


class FallbackChain:
    """The primary model and its fallbacks, as one provider."""

    def __init__(self, candidates: Sequence[Candidate], cooldowns: Cooldowns) -> None:
        if not candidates:
            raise ValueError("a fallback chain needs at least one model")
        self.candidates = tuple(candidates)
        self.cooldowns = cooldowns
        self.model = self.candidates[0].provider.model  # the primary's

    @property
    def providers(self) -> tuple[LLMProvider, ...]:
        return tuple(c.provider for c in self.candidates)

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        primary = self.candidates[0]
        ready = [c for c in self.candidates if not self.cooldowns.cooling(c.label)]
        resting = [c for c in self.candidates if c not in ready]  # last resort, in order
        failovers: list[Failover] = []
        tried: list[Candidate] = []
        last: LLMError | None = None
        streamed = False

        async def sink(text: str) -> None:
            nonlocal streamed
            streamed = True
            assert on_text is not None
            await on_text(text)

        for candidate in (*ready, *resting):
            tried.append(candidate)
            # After a model streamed part of an answer and failed, the next one answers
            # without streaming: the final reply (through the outbox) is the whole answer,
            # and the preview never shows two answers run together.
            stream = None if on_text is None or streamed else sink
            try:
                response = await self._ask(candidate, request, stream)
            except LLMContextOverflow as exc:
                exc.failovers = tuple(failovers)
                raise
            except LLMError as exc:
                if candidate is primary and not exc.transient:
                    exc.failovers = tuple(failovers)
                    raise  # a setting to fix (key, URL, model name): say so, do not hide it
                retry_after = exc.retry_after if isinstance(exc, LLMRateLimited) else None
                self.cooldowns.failed(candidate.label, retry_after, exc.user_message)
                failovers.append(_failover(candidate, exc))
                log.warning(
                    "model %s failed (%s: %s); %s",
                    candidate.label,
                    type(exc).__name__,
                    exc.user_message,
                    "trying the next one" if len(tried) < len(self.candidates) else "none left",
                )
                last = exc
                continue
            self.cooldowns.recovered(candidate.label)
            cooling = tuple(
                Failover(
                    c.label, "Cooling", "failed recently; sitting out its cooldown", None, True
                )
                for c in resting
                if c not in tried
            )
            return replace(
                response, model=candidate.provider.model, failovers=(*cooling, *failovers)
            )
        assert last is not None
        raise LLMAllModelsFailed(failovers, last)

    @staticmethod
    async def _ask(
        candidate: Candidate, request: LLMRequest, on_text: TextSink | None
    ) -> LLMResponse:
        if candidate.slots is None:
            return await candidate.provider.complete(request, on_text=on_text)
        async with candidate.slots.hold():
            return await candidate.provider.complete(request, on_text=on_text)

    async def aclose(self) -> None:
        """Close every model (the gateway closes them itself: they may be shared)."""
        for provider in self.providers:
            with contextlib.suppress(Exception):
                await provider.aclose()


class Tracked:
    """A model without fallbacks, as a provider that reports its answers to the cooldowns
    (so the status says which model answered last)."""

    def __init__(self, provider: LLMProvider, label: str, cooldowns: Cooldowns) -> None:
        self.provider = provider
        self.label = label
        self.cooldowns = cooldowns
        self.model = provider.model

    async def complete(
        self, request: LLMRequest, *, on_text: TextSink | None = None
    ) -> LLMResponse:
        response = await self.provider.complete(request, on_text=on_text)
        self.cooldowns.recovered(self.label)
        return response

    async def aclose(self) -> None:
        await self.provider.aclose()


def _failover(candidate: Candidate, exc: LLMError) -> Failover:
    return Failover(candidate.label, type(exc).__name__, exc.user_message, exc.status_code)
