"""Keeping each prompt inside the model's context window.

Background summarization (:mod:`agent.compaction`) keeps sessions short over time; this is
the last line, before *every* model call of a turn (:class:`TurnFit`): a prompt near the
window first has its old tool results shortened (the newest step's stay whole), and if that
is not enough, or a provider says "context too long", the session is compacted now and the
prompt rebuilt with shorter tool results; if summarizing fails the oldest exchanges are left
out, and a message of the turn too long for the window on its own (a pasted document) is cut
in its middle, with a note saying so to the model; the person is told under the answer
(:func:`cut_note`). A turn always goes on, and so does the chat: a long message kept in
history never makes the next turns fail. The output a request asks for is
fitted into what is left (:class:`agent.llm.metered.MeteredModel`).

A provider's refusal that names the real window (a local server started with a smaller one
than ``llm.context_window``) lowers the window everything is fitted to
(:class:`agent.llm.metered.WindowSize`); one that does not is answered by rebuilding the
prompt for a quarter of the budget, a few times at most.

Everything here runs on the event loop, so it only ever *estimates* tokens (a C-speed
character count); exact tokenizing happens in compaction, on a worker thread. The provider's
own overflow error is the backstop when an estimate falls short.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from agent.compaction import Compactor, SaveFacts, cut_out_middle
from agent.context import ContextBuilder
from agent.llm.errors import LLMContextOverflow
from agent.llm.metered import Charge, prompt_limit
from agent.llm.types import ChatMessage, SystemPrompt, ToolSpec
from agent.request import TurnRequest
from agent.tokens import estimate, message_tokens, tools_tokens
from agent.tools.executor import truncate
from gateway.store import History, StoredMessage

log = logging.getLogger(__name__)

OVERFLOW_RESULT_CHARS = 1_500
OLD_RESULT_CHARS = 300  # a second, harder pass over old tool results in a long turn
OVERFLOW_SQUEEZE = 4  # after a refusal that names no window: a quarter of the budget
MIN_MESSAGE_CHARS = 400  # a message cut to fit keeps at least its start and end
SPACED_WORD_CHARS = 20  # longer "words" on average: a script without spaces, counted in characters


@dataclass(frozen=True, slots=True)
class FittedPrompt:
    """A prompt rebuilt to fit, and the middle of the turn's message it left out (if any)."""

    system: SystemPrompt
    messages: list[ChatMessage]
    left_out: str = ""


def cut_note(left_out: str) -> str:
    """The note under the answer when the person's message was cut to fit the window."""
    words = len(left_out.split())
    size = (
        f"about {words:,} words"
        if words * SPACED_WORD_CHARS >= len(left_out)
        else f"about {len(left_out):,} characters"
    )
    return (
        "Note: your message was too long for the model's context window; I read its start "
        f"and its end and left out the middle ({size})."
    )


class ContextWindow:
    def __init__(
        self,
        *,
        history: History,
        context: ContextBuilder,
        compactor: Compactor | None,
        history_limit: int,
    ) -> None:
        self.compactor = compactor
        self._history = history
        self._context = context
        self._history_limit = history_limit
        self._tools_key: tuple[str, ...] = ()
        self._tools_tokens = 0

    def limit(self, max_tokens: int) -> int | None:
        """Prompt tokens above which a prompt is made smaller before it is sent: near the
        window, or where too little room would be left for the answer."""
        if self.compactor is None:
            return None
        window = self.compactor.window
        return min(self.compactor.preflight_limit, prompt_limit(window, max_tokens))

    def overhead(self, system: SystemPrompt, tools: tuple[ToolSpec, ...]) -> int:
        names = tuple(t.name for t in tools)
        if names != self._tools_key:  # tool schemas rarely change: count them once
            self._tools_key, self._tools_tokens = names, tools_tokens(tools)
        return estimate(system.text) + self._tools_tokens

    def tokens(
        self, system: SystemPrompt, messages: Sequence[ChatMessage], tools: tuple[ToolSpec, ...]
    ) -> int:
        """An estimate of a prompt's size."""
        return self.overhead(system, tools) + sum(message_tokens(m) for m in messages)

    def after_turn(
        self,
        session_key: str,
        system: SystemPrompt,
        tools: tuple[ToolSpec, ...],
        conversation: Sequence[ChatMessage],
        charge: Charge,
        *,
        save: SaveFacts | None = None,
    ) -> None:
        """Summarize in the background once the session gets anywhere near the threshold
        (a cheap estimate decides; short chats cost nothing)."""
        if self.compactor is None:
            return
        overhead = self.overhead(system, tools)
        if (
            len(conversation) >= self.compactor.max_messages - 2
            or overhead + sum(message_tokens(m) for m in conversation)
            >= self.compactor.schedule_from
        ):
            self.compactor.schedule(session_key, overhead, charge.detached(), save)

    async def refit(
        self,
        request: TurnRequest,
        tools: tuple[ToolSpec, ...],
        now: datetime,
        guidance: str,
        pinned: str = "",
        *,
        charge: Charge,
        limit: int | None = None,
        save: SaveFacts | None = None,
    ) -> FittedPrompt:
        """Compact now, then rebuild the prompt with shorter tool results, for a prompt of at
        most ``limit`` tokens (default: the preflight limit). If summarizing fails, the
        oldest history is left out instead; a message of this turn too long on its own is
        cut."""
        if self.compactor is not None:
            overhead = self.overhead(self._context.system_prompt(request, tools, now=now), tools)
            try:
                await self.compactor.wait(request.session_key)
                await self.compactor.compact(
                    request.session_key, overhead, force=True, charge=charge, save=save
                )
            except Exception as exc:  # a broken summarizer must not break the conversation
                log.warning(
                    "compacting %s failed: %s; leaving out old history", request.session_key, exc
                )
        state, stored = await self._history.load(request.session_key, limit=self._history_limit)
        checkpoints = await self._history.checkpoints(request.turn_id)
        system = self._context.system_prompt(
            request,
            tools,
            now=now,
            summary=state.summary,
            guidance=guidance,
            pinned=pinned,
            quotes=state.summary_quotes,
        )
        older = [_shortened(m) for m in stored]
        current = [_shortened(m) for m in checkpoints]
        if self.compactor is None:
            return FittedPrompt(system, [*older, *current])
        # Count each message once, then leave out the oldest exchanges until it fits.
        budget = (self.compactor.preflight_limit if limit is None else limit) - self.overhead(
            system, tools
        )
        current, left_out = self._cut_to_fit(request.session_key, current, budget)
        budget -= sum(message_tokens(m) for m in current)
        counts = [message_tokens(m) for m in older]
        start, total = 0, sum(counts)
        while start < len(older) and total > budget:
            end = _next_exchange(older, start)
            total -= sum(counts[start:end])
            start = end
        return FittedPrompt(system, [*older[start:], *current], left_out)

    def _cut_to_fit(
        self, session_key: str, messages: list[ChatMessage], budget: int
    ) -> tuple[list[ChatMessage], str]:
        """The turn's own messages within ``budget``: its longest user message (a pasted
        document, say) is cut in the middle, with a note for the model, until they fit.
        Also returns the middle left out."""
        excess = sum(message_tokens(m) for m in messages) - budget
        users = [i for i, m in enumerate(messages) if m.role == "user" and m.content]
        if excess <= 0 or not users:
            return messages, ""
        index = max(users, key=lambda i: message_tokens(messages[i]))
        message = messages[index]
        tokens = message_tokens(message)
        share = max(0.0, (tokens - excess) / tokens) * 0.9  # estimates err; leave a margin
        window = self.compactor.window if self.compactor is not None else 0
        note = (
            f": the message was longer than the model's context window ({window} tokens, "
            "llm.context_window); only its start and end were read"
        )
        chars = max(MIN_MESSAGE_CHARS, int(len(message.content) * share))
        content, left_out = cut_out_middle(message.content, chars, note)
        cut = replace(message, content=content)
        log.warning(
            "a message of %s (~%d tokens) was cut to ~%d tokens to fit the context window "
            "(%d tokens, llm.context_window)",
            session_key,
            tokens,
            message_tokens(cut),
            window,
        )
        return [*messages[:index], cut, *messages[index + 1 :]], left_out

    async def settle(self) -> None:
        if self.compactor is not None:
            await self.compactor.settle()

    async def stop(self) -> None:
        if self.compactor is not None:
            await self.compactor.stop()


@dataclass(slots=True)
class TurnFit:
    """What a turn's loop needs to keep each call inside the window (agent.turn.inputs.Fit).

    ``rebuild(limit)`` compacts and rebuilds the turn's prompt for at most ``limit`` tokens
    (:meth:`ContextWindow.refit`)."""

    window: ContextWindow
    max_tokens: int  # the answer each call asks for (the window leaves room for it)
    rebuild: Callable[[int], Awaitable[FittedPrompt]]
    squeeze: int = 0  # refusals that named no window: each cuts the budget to a quarter
    built_for: int = 0  # the window the prompt was last built for
    left_out: str = ""  # what the latest prompt left out of the person's message

    def __post_init__(self) -> None:
        self.built_for = self.window_tokens

    @property
    def limit(self) -> int:
        """Prompt tokens above which the prompt is made smaller: follows the window as it
        is learned or reconfigured."""
        limit = self.window.limit(self.max_tokens)
        return (limit or 0) // int(OVERFLOW_SQUEEZE**self.squeeze)

    def tokens(
        self, system: SystemPrompt, messages: Sequence[ChatMessage], tools: tuple[ToolSpec, ...]
    ) -> int:
        return self.window.tokens(system, messages, tools)

    async def refit(
        self, overflow: LLMContextOverflow | None = None
    ) -> tuple[SystemPrompt, list[ChatMessage]]:
        """Rebuild the prompt; after a provider's refusal (``overflow``), smaller: for the
        window it named (learned by the model already), or else a quarter of the budget."""
        if overflow is not None and self.window_tokens >= self.built_for:
            self.squeeze += 1  # the window is what we thought: our estimate fell short
        self.built_for = self.window_tokens
        fitted = await self.rebuild(self.limit)
        self.left_out = fitted.left_out
        return fitted.system, fitted.messages

    @property
    def note(self) -> str:
        """For the person, under the answer: their message was cut to fit (or ``""``)."""
        return cut_note(self.left_out) if self.left_out else ""

    @property
    def window_tokens(self) -> int:
        compactor = self.window.compactor
        return compactor.window if compactor is not None else 0


def shrink_old_results(conversation: list[ChatMessage], needed: int) -> int:
    """Shorten tool results, oldest first, until about ``needed`` tokens are saved: first to
    OVERFLOW_RESULT_CHARS, then (if that is not enough) to OLD_RESULT_CHARS. The results of
    the newest step, which the model has not read yet, stay whole. Returns the tokens saved
    (an estimate)."""
    newest = max(
        (i for i, m in enumerate(conversation) if m.role == "assistant" and m.tool_calls),
        default=len(conversation),
    )
    saved = 0
    for limit in (OVERFLOW_RESULT_CHARS, OLD_RESULT_CHARS):
        for index, message in enumerate(conversation[:newest]):
            if saved >= needed:
                return saved
            if message.role == "tool" and len(message.content) > limit:
                short = replace(message, content=truncate(message.content, limit))
                saved += message_tokens(message) - message_tokens(short)
                conversation[index] = short
    return saved


def _next_exchange(messages: list[ChatMessage], start: int) -> int:
    """Where the exchange after the one starting at ``start`` begins (its next user message)."""
    for index in range(start + 1, len(messages)):
        if messages[index].role == "user":
            return index
    return len(messages)


def _shortened(message: StoredMessage) -> ChatMessage:
    msg = ChatMessage.from_body(message.body)
    if msg.role == "tool" and len(msg.content) > OVERFLOW_RESULT_CHARS:
        return replace(msg, content=truncate(msg.content, OVERFLOW_RESULT_CHARS))
    return msg
