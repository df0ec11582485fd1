"""Every model call of the gateway goes through here: one concurrency cap per endpoint, a
request that fits the context window, and usage charged to someone.

- **One cap per endpoint, people first.** :class:`~agent.llm.slots.EndpointSlots` hands out
  one :class:`~agent.llm.slots.ModelSlots` per provider endpoint (provider and base URL)
  for the whole gateway, so every agent, subagent, summary, reflection and page condensing
  that talks to one local model server shares ``limits.max_concurrent_llm_calls``. A call
  made for work nobody waits for (:attr:`Charge.background`: reflection, a summary in the
  background) never keeps a person's call waiting: it yields its slot, and is asked again
  from the start when a slot is free (at most :data:`MAX_CUTS` times). It streams, so a
  server that notices the closed request stops writing at once.
- **Within the window.** A request asks for at most the output the window has room for
  after its prompt (``max_tokens`` is lowered, never the prompt cut: keeping the prompt
  small is the turn's job, see :mod:`agent.window`).
- **Charged.** Each call is charged to the model that answered it (with fallback models,
  :mod:`agent.llm.fallback`, not always the configured one), at that model's price
  (:class:`gateway.config.prices.PriceTable`). Each call names its :class:`Purpose` and a
  :class:`Charge`. While a turn runs its calls add up in the turn's :class:`TurnUsage` (the
  per-turn token cap counts them, and they are committed with the turn); calls outside a
  turn (reflection, a background summary) are recorded on their own right away.
- **Within the money caps.** A turn that began with an :class:`Allowance` (what the
  gateway's money caps left it) makes no call whose estimate would pass it: the whole prompt
  at the uncached price (our estimate scaled by what the provider counted for this model so
  far, :mod:`agent.llm.reconcile`) and the largest answer the call asks for, i.e. the most
  the call can cost, at the dearest model that may answer. When the money left pays the
  prompt but not the whole answer, the call asks for the answer it pays for (``max_tokens``
  lowered; the providers stop there), so a small cap still gets answers; when it pays less
  than :data:`MIN_PAID_ANSWER` tokens of answer the call raises :class:`OverAllowance`
  before it is made.
- **Counted honestly.** Each call's estimate is compared with the provider's count
  (:class:`agent.llm.reconcile.Reconciler`), which is the one recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from agent.llm.base import LLMProvider, TextSink
from agent.llm.errors import LLMContextOverflow
from agent.llm.reconcile import Reconciler
from agent.llm.slots import BACKGROUND, ModelSlots
from agent.llm.types import ChatMessage, LLMRequest, LLMResponse, SystemPrompt, ToolSpec, Usage
from agent.tokens import TokenCounter, estimate, message_tokens, tools_tokens
from gateway.config.prices import PriceTable
from gateway.core.usage import Purpose, usd

log = logging.getLogger(__name__)

MIN_OUTPUT_TOKENS = 128  # never ask for less than this, whatever the estimate says
# The shortest answer worth a call when the money caps leave too little for the whole
# llm.max_tokens: a few paragraphs, or a tool call with its arguments.
MIN_PAID_ANSWER = 256
MIN_WINDOW = 512  # a window learned from refusals never goes below this
MAX_CUTS = 3  # a background call cut this often for people's calls is given up


class CallCut(Exception):
    """A background call given up: people's calls took its endpoint's slot each time it
    was asked (:data:`MAX_CUTS` times)."""


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """Tokens one purpose used on one model, in one run of a turn (``part``)."""

    purpose: Purpose
    model: str
    usage: Usage
    part: str = ""


@dataclass(frozen=True, slots=True)
class Allowance:
    """What a turn may spend before it passes a money cap, as the gateway found it when the
    turn began (gateway/runtime/people/spend.py), in words the person is told."""

    left_usd: float
    cap: str  # which cap: "your daily allowance of $0.50"
    resets: str  # when it starts afresh: "in 5 h 12 min (at 00:00 UTC)"
    limit_usd: float  # the whole cap, what a fresh day or month has
    setting: str  # the setting that made it: "limits.person_daily_usd"


class OverAllowance(Exception):
    """A model call refused before it was made: even its shortest answer (``answer``
    tokens) would pass the turn's cap; ``estimate_usd`` is the most that call can cost."""

    def __init__(
        self, estimate_usd: float, left_usd: float, allowance: Allowance, *, answer: int
    ) -> None:
        super().__init__(
            f"a call of at least {answer} answer tokens estimated at ${estimate_usd:.4f} "
            f"with ${left_usd:.4f} left"
        )
        self.estimate_usd = estimate_usd
        self.left_usd = left_usd
        self.allowance = allowance
        self.answer = answer

    @property
    def notice(self) -> str:
        allowance = self.allowance
        cost = usd(self.estimate_usd)
        if self.estimate_usd > allowance.limit_usd:
            # a fresh day or month would not pay it either: waiting for the reset is no help
            return (
                f"I stopped before asking the model: {allowance.cap} is too small for one "
                f"answer here. This request would cost up to about {cost} even with a short "
                f"answer ({self.answer} tokens). A shorter message, or /new for a fresh "
                f"conversation, costs less; the cap is the setting {allowance.setting}."
            )
        left = max(0.0, self.left_usd)
        return (
            f"I stopped before asking the model: this request would cost up to about "
            f"{cost} and {allowance.cap} has {usd(left)} left. "
            f"It resets {allowance.resets}. A shorter message, or /new for a fresh "
            f"conversation, costs less."
        )


@dataclass(slots=True)
class TurnUsage:
    """What a running turn has used so far, by purpose and model, and what it may spend.

    ``part`` names this run of the turn: a turn run again (after a crash, a restart or an
    approval) is metered anew, and its rows add to those an earlier run stored rather than
    replace them."""

    _by: dict[tuple[Purpose, str], Usage] = field(default_factory=dict)
    allowance: Allowance | None = None  # None: no money cap applies to the turn
    part: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def add(self, purpose: Purpose, model: str, usage: Usage) -> None:
        key = (purpose, model)
        self._by[key] = self._by.get(key, Usage()) + usage

    @property
    def total(self) -> Usage:
        return sum(self._by.values(), Usage())

    @property
    def tokens(self) -> int:
        total = self.total
        return total.input_tokens + total.output_tokens

    @property
    def cost_usd(self) -> float:
        return self.total.cost_usd or 0.0

    def used(self, purpose: Purpose, model: str) -> Usage:
        return self._by.get((purpose, model), Usage())

    def entries(self) -> tuple[UsageEntry, ...]:
        return tuple(UsageEntry(p, m, u, self.part) for (p, m), u in self._by.items())


@dataclass(frozen=True, slots=True)
class Charge:
    """Who pays for a model call: the session and person, and the running turn if any."""

    session_key: str
    turn_id: str | None = None
    principal: str | None = None  # whose allowance: Principal.person
    meter: TurnUsage | None = None  # the running turn's; None: recorded on its own
    background: bool = False  # nobody waits for the call: it yields to people's calls

    def detached(self) -> Charge:
        """The same payer, for work that outlives the turn (recorded on its own, and done
        in the background: its calls never keep a person's call waiting)."""
        return replace(self, meter=None, background=True)


# (charge, purpose, model, usage): store one call that no turn commits, or (the charge has
# a meter) what the running turn has used so far for that purpose and model.
UsageRecorder = Callable[[Charge, Purpose, str, Usage], Awaitable[None]]


def prompt_tokens(request: LLMRequest, tools: int | None = None) -> int:
    """An estimate of the request's prompt (system, messages, and the tool schemas unless
    their count is given)."""
    return (
        estimate(request.system.text)
        + sum(message_tokens(m) for m in request.messages)
        + (tools_tokens(request.tools) if tools is None else tools)
    )


def safety_margin(window: int) -> int:
    """Room kept free for what a character-based estimate misses (a tokenizer that splits
    finer, the provider's message framing): a tenth of the window."""
    return window // 10


def output_room(prompt: int, window: int) -> int:
    """How many tokens of output fit after ``prompt`` (an estimate)."""
    return window - prompt - safety_margin(window)


def prompt_limit(window: int, max_tokens: int) -> int:
    """The largest prompt that still leaves room for a useful answer (``max_tokens``, or a
    quarter of the window if that is less)."""
    return window - safety_margin(window) - min(max_tokens, window // 4)


class WindowSize:
    """The model's context window in tokens, shared by everything that fits prompts to it
    (:class:`MeteredModel`, the compactor, :mod:`agent.window`): ``llm.context_window``,
    lowered when the model's server refuses a prompt naming a smaller window (a local server
    started with a small ``--ctx-size``), set anew when the configuration is reloaded."""

    def __init__(self, configured: int) -> None:
        self.configured = configured
        self.tokens = configured

    def learn(self, tokens: int | None) -> bool:
        """A window the server named; ``True`` when it is smaller than the one in use."""
        if tokens is None or tokens >= self.tokens:
            return False
        log.warning(
            "the model's server says its context window is %d tokens, less than "
            "llm.context_window = %d: using %d from now on; set it with "
            "`switchboard config set llm.context_window %d`",
            tokens,
            self.configured,
            tokens,
            tokens,
        )
        self.tokens = tokens
        return True

    def refused(self, asked: int) -> None:
        """The server refused ``asked`` tokens (prompt and answer, as we estimate them)
        without naming its window: it is smaller than that; half of it is used."""
        bound = max(MIN_WINDOW, asked // 2)
        if bound >= self.tokens:
            return
        log.warning(
            "the model's server refused a prompt of about %d tokens as too long for its "
            "context window (llm.context_window = %d): fitting prompts to %d tokens from now "
            "on; set llm.context_window to the server's window",
            asked,
            self.configured,
            bound,
        )
        self.tokens = bound

    def configure(self, tokens: int) -> None:
        """``llm.context_window`` changed (a reload): believed again, whatever was learned."""
        self.configured = self.tokens = tokens


class MeteredModel:
    """An agent's model as the gateway calls it: capped, fitted to the window, metered."""

    def __init__(
        self,
        provider: LLMProvider,
        *,
        slots: ModelSlots | None,
        context_window: int | WindowSize,
        record: UsageRecorder | None = None,
        counter: TokenCounter | None = None,
        max_tokens: int = 4_096,
        temperature: float | None = None,
        prices: PriceTable | None = None,
        reconciler: Reconciler | None = None,
        fallbacks: Sequence[str] = (),
    ) -> None:
        self.provider = provider
        # the models that may answer instead (llm.fallbacks): a call's estimate is at the
        # dearest price of them all, as any of them may be the one that answers
        self._fallbacks = tuple(fallbacks)
        self.window = (
            context_window if isinstance(context_window, WindowSize) else WindowSize(context_window)
        )
        self.max_tokens = max_tokens  # asked for per call, lowered when the window is tight
        self._temperature = temperature
        self._slots = slots
        self._record = record
        self._counter = counter  # counts what a server does not report (llama.cpp streams)
        self._tools: tuple[tuple[str, ...], int] = ((), 0)  # the last tool set and its size
        self.prices = prices or PriceTable()
        self._reconciler = reconciler or Reconciler()
        self._unpriced: set[str] = set()  # models said to have no price (once each)

    @property
    def model(self) -> str:
        return self.provider.model

    @property
    def context_window(self) -> int:
        return self.window.tokens

    async def ask(
        self,
        system: SystemPrompt,
        conversation: Sequence[ChatMessage],
        tools: tuple[ToolSpec, ...] = (),
        on_text: TextSink | None = None,
        *,
        purpose: Purpose,
        charge: Charge,
    ) -> LLMResponse:
        """One call with this agent's output size and temperature."""
        request = LLMRequest(system, tuple(conversation), tools, self.max_tokens, self._temperature)
        return await self.complete(request, purpose=purpose, charge=charge, on_text=on_text)

    async def complete(
        self,
        request: LLMRequest,
        *,
        purpose: Purpose,
        charge: Charge,
        on_text: TextSink | None = None,
    ) -> LLMResponse:
        names = tuple(t.name for t in request.tools)
        if names != self._tools[0]:  # tool schemas rarely change: count them once
            self._tools = (names, tools_tokens(request.tools))
        prompt = prompt_tokens(request, self._tools[1])
        room = output_room(prompt, self.context_window)
        if request.max_tokens > room:
            request = replace(request, max_tokens=max(MIN_OUTPUT_TOKENS, room))
        request = self._within_allowance(prompt, request, charge)
        written = [0]  # tokens streamed so far: what a cut call was billed for writing
        try:
            response = await self._call(request, on_text, written, background=charge.background)
        except asyncio.CancelledError:  # a stop (or a shutdown) cut the call short
            self._charge_cut(prompt, written[0], purpose, charge)
            raise
        except LLMContextOverflow as exc:  # the next prompts are fitted to the real window
            if exc.window is not None:
                self.window.learn(exc.window)
            else:
                self.window.refused(prompt + request.max_tokens)
            raise
        response = bounded(response, request)
        if not (response.usage.input_tokens or response.usage.output_tokens) and self._counter:
            response = replace(response, usage=await self._estimated(request, response))
        model = response.model or self.model  # a fallback may have answered
        self._reconciler.observe(model, prompt, answer_tokens(response), response.usage)
        response = replace(response, usage=self._priced(model, response.usage))
        usage = response.usage
        if charge.meter is not None:
            charge.meter.add(purpose, model, usage)
            if purpose is Purpose.TURN and not response.tool_calls:
                return response  # the turn's last call: its commit follows at once
            # the turn goes on (tools run, maybe for minutes): what it spent is stored now,
            # so a crash or a restart before its commit does not lose it from the caps
            usage = charge.meter.used(purpose, model)
        if self._record is not None:
            try:
                await self._record(charge, purpose, model, usage)
            except Exception as exc:  # the answer is not lost over its accounting
                log.warning("could not record the usage of a %s call: %s", purpose.value, exc)
        return response

    async def _call(
        self,
        request: LLMRequest,
        on_text: TextSink | None,
        written: list[int],
        *,
        background: bool,
    ) -> LLMResponse:
        if background:
            return await self._in_background(request, on_text, written)
        return await self._held(request, on_text, written)

    async def _held(
        self, request: LLMRequest, on_text: TextSink | None, written: list[int]
    ) -> LLMResponse:
        """The provider's answer, within this model's calls at once; ``written[0]`` counts
        the tokens it streamed (what a call cut short was billed for writing)."""
        sink = on_text
        if on_text is not None:

            async def sink(piece: str) -> None:
                written[0] += estimate(piece)
                await on_text(piece)

        if self._slots is None:  # a fallback chain: each of its models has its own cap
            return await self.provider.complete(request, on_text=sink)
        async with self._slots.hold():
            return await self.provider.complete(request, on_text=sink)

    async def _in_background(
        self, request: LLMRequest, on_text: TextSink | None, written: list[int]
    ) -> LLMResponse:
        """A call nobody waits for: in a task of its own, which the endpoint's slots may
        cut for a person's call (:mod:`agent.llm.slots`); then it is asked again, once a
        slot is free and no person waits. Streamed (unless someone reads it already), so a
        server that notices the closed request stops writing at once."""

        async def ignore(piece: str) -> None:
            return None

        async def call() -> LLMResponse:
            BACKGROUND.set(True)  # in this task's own context only
            return await self._held(request, on_text or ignore, written)

        for attempt in range(MAX_CUTS):
            task = asyncio.create_task(call())
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:  # the caller stops: so does its call
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                raise
            if not task.cancelled():
                return task.result()
            written[0] = 0  # asked again from the start
            log.info(
                "a background call to %s gave its slot to a person's call (%d of %d); "
                "asked again when a slot is free",
                self.model,
                attempt + 1,
                MAX_CUTS,
            )
        raise CallCut(f"people's calls took the slot of {self.model} {MAX_CUTS} times")

    def _charge_cut(self, prompt: int, written: int, purpose: Purpose, charge: Charge) -> None:
        """A call cut short still costs: the provider bills the prompt it read and what it
        wrote before the cut. Both are estimated (no usage came back) and go on the turn's
        meter, which the stopped turn commits, so usage and the money caps count them."""
        if charge.meter is None:
            return  # a call outside a turn: its cut leaves nothing to commit it with
        usage = Usage(prompt, written, estimated_tokens=prompt + written)
        charge.meter.add(purpose, self.model, self._priced(self.model, usage))

    def _within_allowance(self, prompt: int, request: LLMRequest, charge: Charge) -> LLMRequest:
        """``request`` as what the turn may still spend pays for it: as it is when that pays
        the most it can cost; asking for a shorter answer when the money left pays only
        that (at least :data:`MIN_PAID_ANSWER` tokens, or all it asked for); else
        :class:`OverAllowance`."""
        meter = charge.meter
        if meter is None or meter.allowance is None:
            return request
        # per model that may answer: (its prompt, one answer token), in US dollars
        rates = [
            (
                price.cost(
                    input_tokens=round(prompt * self._reconciler.ratio(model)), output_tokens=0
                ),
                price.cost(input_tokens=0, output_tokens=1),
            )
            for model in (self.model, *self._fallbacks)
            if (price := self.prices.price(model)) is not None
        ]
        if not rates:
            return request  # no model of them has a price: free, as far as the caps know
        left = meter.allowance.left_usd - meter.cost_usd
        asked = request.max_tokens
        # any of the models may be the one that answers: the least answer of them is paid
        paid = min(
            answer_paid(left, prompt_usd, per_token, asked) for prompt_usd, per_token in rates
        )
        if paid >= asked:
            return request
        shortest = min(asked, MIN_PAID_ANSWER)
        if paid < shortest:
            most = max(prompt_usd + shortest * per_token for prompt_usd, per_token in rates)
            raise OverAllowance(most, left, meter.allowance, answer=shortest)
        log.info(
            "a %s call asks for %d answer tokens instead of %d: that is what %s leaves",
            self.model,
            paid,
            asked,
            meter.allowance.setting,
        )
        return replace(request, max_tokens=paid)

    def _priced(self, model: str, usage: Usage) -> Usage:
        """``usage`` with its cost at ``model``'s price (a model without one: said once)."""
        cost = self.prices.cost(
            model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )
        if cost is None and model not in self._unpriced:
            self._unpriced.add(model)
            log.info(
                "model %s has no price: its calls count as free against the money caps; set "
                '[llm.prices."%s"] input and output (US dollars per million tokens)',
                model,
                model,
            )
        return replace(usage, cost_usd=cost)

    async def _estimated(self, request: LLMRequest, response: LLMResponse) -> Usage:
        """The server reported no usage (llama.cpp's server does not in a stream): counted
        with tiktoken on a worker thread (the encoder loads once), and marked as counted by
        us, so traces, the status page and the per-person limits still see the tokens."""
        counter = self._counter
        assert counter is not None

        def count() -> tuple[int, int]:
            counter.load()
            prompt = (
                counter.count(request.system.text)
                + counter.messages(request.messages)
                + counter.tools(request.tools)
            )
            calls = sum(
                counter.count(c.name) + counter.count(c.arguments) for c in response.tool_calls
            )
            return prompt, counter.count(response.text) + calls

        prompt, answer = await asyncio.to_thread(count)
        return replace(
            response.usage,
            input_tokens=prompt,
            output_tokens=answer,
            estimated_tokens=prompt + answer,
        )


def answer_paid(left: float, prompt_usd: float, per_token: float, asked: int) -> int:
    """How many answer tokens (at most ``asked``) ``left`` dollars pay after a prompt that
    costs ``prompt_usd``; -1 when they do not pay the prompt."""
    if prompt_usd + asked * per_token <= left:
        return asked
    if prompt_usd > left:
        return -1
    return min(asked, math.floor((left - prompt_usd) / per_token))


def answer_tokens(response: LLMResponse) -> int:
    """An estimate of the answer's tokens: its text and its tool calls."""
    return estimate(response.text) + sum(
        estimate(c.name) + estimate(c.arguments) for c in response.tool_calls
    )


# No tokenizer packs more characters than this into one token: an answer longer than
# max_tokens times this is a server that ignored max_tokens (or lies about it).
CHARS_PER_TOKEN_CEILING = 12
MIN_ANSWER_CHARS = 20_000


def bounded(response: LLMResponse, request: LLMRequest) -> LLMResponse:
    """Cut an answer far longer than ``max_tokens`` allows, so one runaway server cannot
    flood a chat with thousands of messages or fill the history."""
    limit = max(MIN_ANSWER_CHARS, request.max_tokens * CHARS_PER_TOKEN_CEILING)
    if len(response.text) <= limit:
        return response
    log.warning(
        "the model's answer had %d characters for max_tokens=%d; cut to %d",
        len(response.text),
        request.max_tokens,
        limit,
    )
    note = f"\n\n[The answer was cut at {limit} characters: the model ran past its length limit.]"
    return replace(response, text=response.text[:limit] + note)
