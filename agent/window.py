"""Keeping each prompt inside the model's context window.

Background summarization (:mod:`agent.compaction`) keeps sessions short over time; this is
the last line: before a turn's first model call, and after a provider's "context too long"
error, the prompt is compacted now, tool results are shortened, and if summarizing fails the
oldest exchanges are left out. A turn always goes on.

Everything here runs on the event loop, so it only ever *estimates* tokens (a C-speed
character count); exact tokenizing happens in compaction, on a worker thread. The provider's
own overflow error is the backstop when an estimate falls short.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from agent.compaction import Compactor
from agent.context import ContextBuilder
from agent.llm.types import ChatMessage, SystemPrompt, ToolSpec
from agent.tokens import estimate, message_tokens, tools_tokens
from agent.tools.executor import truncate
from agent.turn import TurnRequest
from gateway.store import History, StoredMessage

log = logging.getLogger(__name__)

OVERFLOW_RESULT_CHARS = 1_500


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

    def overhead(self, system: SystemPrompt, tools: tuple[ToolSpec, ...]) -> int:
        names = tuple(t.name for t in tools)
        if names != self._tools_key:  # tool schemas rarely change: count them once
            self._tools_key, self._tools_tokens = names, tools_tokens(tools)
        return estimate(system.text) + self._tools_tokens

    def over_budget(
        self, system: SystemPrompt, tools: tuple[ToolSpec, ...], conversation: Sequence[ChatMessage]
    ) -> bool:
        if self.compactor is None:
            return False
        total = self.overhead(system, tools) + sum(message_tokens(m) for m in conversation)
        return total > self.compactor.preflight_limit

    def after_turn(
        self,
        session_key: str,
        system: SystemPrompt,
        tools: tuple[ToolSpec, ...],
        conversation: Sequence[ChatMessage],
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
            self.compactor.schedule(session_key, overhead)

    async def refit(
        self,
        request: TurnRequest,
        tools: tuple[ToolSpec, ...],
        now: datetime,
        guidance: str,
        pinned: str = "",
    ) -> tuple[SystemPrompt, list[ChatMessage]]:
        """Compact now, then rebuild the prompt with shorter tool results. If summarizing
        fails, the oldest history is left out instead."""
        if self.compactor is not None:
            overhead = self.overhead(self._context.system_prompt(request, tools, now=now), tools)
            try:
                await self.compactor.wait(request.session_key)
                await self.compactor.compact(request.session_key, overhead, force=True)
            except Exception as exc:  # a broken summarizer must not break the conversation
                log.warning(
                    "compacting %s failed: %s; leaving out old history", request.session_key, exc
                )
        state, stored = await self._history.load(request.session_key, limit=self._history_limit)
        drafts = await self._history.drafts(request.turn_id)
        system = self._context.system_prompt(
            request, tools, now=now, summary=state.summary, guidance=guidance, pinned=pinned
        )
        older = [_shortened(m) for m in stored]
        current = [_shortened(m) for m in drafts]
        if self.compactor is None:
            return system, [*older, *current]
        # Count each message once, then leave out the oldest exchanges until it fits.
        budget = self.compactor.preflight_limit - self.overhead(system, tools)
        budget -= sum(message_tokens(m) for m in current)
        counts = [message_tokens(m) for m in older]
        start, total = 0, sum(counts)
        while start < len(older) and total > budget:
            end = _next_exchange(older, start)
            total -= sum(counts[start:end])
            start = end
        return system, [*older[start:], *current]

    async def stop(self) -> None:
        if self.compactor is not None:
            await self.compactor.stop()


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
