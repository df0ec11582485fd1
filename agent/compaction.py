"""Summarization of long conversations (AI Legion's rules, Mini-Agent's round condensing).

When a session's prompt passes 75% of the context window, its older messages are
summarized by the model into the session summary, which then replaces them in the prompt:

- at least 3 recent messages are kept, and at least half of the older ones summarized;
- the cut lands on a user message, so no tool call is split from its result;
- the word limit follows from the budget; the summary is kept only if it saves tokens;
- nothing is deleted: summarized messages stay on disk and in full-text search.

It runs in the background after the reply, once per session at a time, under a time
budget; a failure only means the next turn tries again. A provider "context too long"
error forces an immediate compaction (see :mod:`agent.agent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from agent.llm.metered import Charge, WindowSize
from agent.llm.types import ChatMessage
from agent.tokens import TokenCounter, estimate
from gateway.store import History, StoredMessage

log = logging.getLogger(__name__)

# (prompt, who pays) -> the summary
Summarize = Callable[[str, Charge], Awaitable[str]]

THRESHOLD = 0.75  # compact when the prompt passes this share of the window
TARGET = 0.45  # and bring it down to about this share
PREFLIGHT = 0.85  # a prompt above this share is compacted before it is sent
MIN_KEEP = 3

SUMMARY_PROMPT = """\
Below is the earlier part of a conversation between you (the assistant) and the user{previous}.
Write a summary of it in at most {words} words, for your own future reference. Keep every \
fact the user stated (names, dates, numbers, preferences, decisions), open tasks and \
promises, and results you found. Plain text in the second person ("You told the user..."), \
no preamble.

{transcript}"""


@dataclass(frozen=True, slots=True)
class Compaction:
    summarized: int  # messages folded into the summary
    tokens_before: int
    tokens_after: int
    kept: bool  # False when the summary did not save tokens and was discarded


def render_transcript(
    messages: Sequence[ChatMessage], *, result_chars: int = 400, message_chars: int = 6_000
) -> str:
    """The conversation as the summarizer reads it. A message too long to go whole into
    the summary prompt (a pasted document) is cut in its middle: its start and end tell
    what it was."""
    lines = []
    for msg in messages:
        if msg.role == "user":
            lines.append(f"User: {cut_middle(msg.content, message_chars)}")
        elif msg.role == "assistant":
            if msg.content:
                lines.append(f"Assistant: {cut_middle(msg.content, message_chars)}")
            lines.extend(f"Assistant used {c.name}({c.arguments[:200]})" for c in msg.tool_calls)
        else:
            result = (
                msg.content
                if len(msg.content) <= result_chars
                else msg.content[:result_chars] + " ..."
            )
            lines.append(f"Result of {msg.name or 'tool'}: {result}")
    return "\n".join(lines)


def cut_middle(text: str, limit: int, note: str = "") -> str:
    """``text`` within ``limit`` characters: its start and its end, and between them how
    much was left out (and ``note``, why)."""
    return cut_out_middle(text, limit, note)[0]


def cut_out_middle(text: str, limit: int, note: str = "") -> tuple[str, str]:
    """:func:`cut_middle`, and the middle it left out (``""`` when nothing was)."""
    if len(text) <= limit:
        return text, ""
    keep = max(0, limit - 120 - len(note))
    head, tail = text[: keep * 2 // 3], text[len(text) - keep // 3 :] if keep // 3 else ""
    middle = text[len(head) : len(text) - len(tail)]
    return f"{head}\n[... {len(middle)} characters left out{note} ...]\n{tail}", middle


def choose_cut(
    tokens: Sequence[int],
    roles: Sequence[str],
    *,
    overhead: int,
    target: int,
    max_kept: int | None = None,
) -> int:
    """How many leading messages to summarize (0: none). Lands on a user message."""
    n = len(tokens)
    if n <= MIN_KEEP:
        return 0
    cut = (n + 1) // 2  # at least half of the older messages
    if max_kept is not None:
        cut = max(cut, n - max_kept)
    remaining = sum(tokens[cut:]) + overhead
    while cut < n - MIN_KEEP and remaining > target:
        remaining -= tokens[cut]
        cut += 1
    while cut < n - MIN_KEEP and roles[cut] != "user":
        cut += 1
    while cut > 0 and roles[cut] != "user":
        cut -= 1
    return cut if cut >= 2 else 0


class Compactor:
    def __init__(
        self,
        *,
        history: History,
        summarize: Summarize,
        counter: TokenCounter,
        window: int | WindowSize,
        max_messages: int = 200,
        time_budget: float = 120.0,
    ) -> None:
        self._history = history
        self._summarize = summarize
        self._counter = counter
        # shared with the model (MeteredModel): lowered when its server names a smaller one
        self.size = window if isinstance(window, WindowSize) else WindowSize(window)
        self.max_messages = max_messages  # the history cap per prompt (agent.history_max_messages)
        self._time_budget = time_budget
        self._running: dict[str, asyncio.Task[Compaction | None]] = {}
        self._again: dict[str, tuple[int, Charge]] = {}

    @property
    def window(self) -> int:
        return self.size.tokens

    @property
    def threshold(self) -> int:
        return int(self.window * THRESHOLD)

    @property
    def schedule_from(self) -> int:
        """Below this estimate a session is not even looked at after its turn."""
        return int(self.window * 0.6)

    @property
    def preflight_limit(self) -> int:
        """Above this, a turn compacts before its first model call instead of in the background."""
        return int(self.window * PREFLIGHT)

    def running(self, session_key: str) -> bool:
        return session_key in self._running

    def schedule(self, session_key: str, overhead: int, charge: Charge) -> None:
        """Compact in the background if needed; one run per session at a time (a request
        that arrives during a run is remembered and runs right after it)."""
        if session_key in self._running:
            self._again[session_key] = (overhead, charge)
            return
        task = asyncio.create_task(
            self._guarded(session_key, overhead, charge), name=f"compact:{session_key}"
        )
        self._running[session_key] = task
        task.add_done_callback(lambda _: self._finished(session_key))

    def _finished(self, session_key: str) -> None:
        self._running.pop(session_key, None)
        again = self._again.pop(session_key, None)
        if again is not None:
            self.schedule(session_key, *again)

    async def wait(self, session_key: str) -> None:
        """Until no compaction of this session is running or queued."""
        while (task := self._running.get(session_key)) is not None:
            with contextlib.suppress(Exception):
                await task
            await asyncio.sleep(0)  # let the done callback start a queued run

    async def settle(self) -> None:
        """Until no compaction of any session is running or queued."""
        for session_key in list(self._running):
            await self.wait(session_key)

    async def stop(self) -> None:
        self._again.clear()
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _guarded(self, session_key: str, overhead: int, charge: Charge) -> Compaction | None:
        try:
            async with asyncio.timeout(self._time_budget):
                return await self.compact(session_key, overhead, charge=charge)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never blocks or breaks the session; the next turn retries
            log.warning("summarizing %s failed: %s", session_key, exc)
            return None

    async def compact(
        self, session_key: str, overhead: int, *, force: bool = False, charge: Charge
    ) -> Compaction | None:
        state, stored = await self._history.load(session_key, limit=None)
        summary_tokens = estimate(state.summary or "")
        estimated = sum(m.tokens or estimate(str(m.body.get("content", ""))) for m in stored)
        # Past the message cap, history would be dropped silently from the prompt: summarize.
        too_many = len(stored) >= self.max_messages
        if (
            not force
            and not too_many
            and estimated + overhead + summary_tokens < self.schedule_from
        ):
            return None  # far from the threshold: not worth an exact count
        tokens = await self._exact_tokens(stored)
        total = sum(tokens) + overhead + summary_tokens
        if not force and not too_many and total <= self.threshold:
            return None
        cut = choose_cut(
            tokens,
            [m.role for m in stored],
            overhead=overhead,
            target=int(self.window * TARGET),
            max_kept=self.max_messages // 2,
        )
        if cut == 0:
            return None
        older = [ChatMessage.from_body(m.body) for m in stored[:cut]]
        words = max(120, min(800, self.threshold // 8))
        previous = (
            f' (your earlier summary comes first: "{state.summary}")' if state.summary else ""
        )
        prompt = SUMMARY_PROMPT.format(
            previous=previous, words=words, transcript=render_transcript(older)
        )
        summary = (await self._summarize(prompt, charge)).strip()
        replaced = sum(tokens[:cut]) + summary_tokens
        after = self._counter.count(summary)
        kept = bool(summary) and after < replaced
        if kept:
            await self._history.set_summary(session_key, summary, stored[cut - 1].id)
            log.info(
                "summarized %d messages of %s: %d → %d tokens", cut, session_key, replaced, after
            )
        else:
            log.info(
                "discarded a summary of %s that saved nothing (%d → %d tokens)",
                session_key,
                replaced,
                after,
            )
        return Compaction(cut, total, total - replaced + after if kept else total, kept)

    async def _exact_tokens(self, stored: Sequence[StoredMessage]) -> list[int]:
        """Exact counts, cached on the messages; tokenizing runs on a worker thread so a
        long session never stalls the other chats."""

        def count_all() -> tuple[list[int], list[tuple[int, int]]]:
            self._counter.load()
            counts: list[int] = []
            fresh: list[tuple[int, int]] = []
            for message in stored:
                if message.tokens:
                    counts.append(message.tokens)
                    continue
                count = self._counter.message(ChatMessage.from_body(message.body))
                counts.append(count)
                if self._counter.exact:
                    fresh.append((message.id, count))
            return counts, fresh

        counts, fresh = await asyncio.to_thread(count_all)
        if fresh:
            await self._history.set_tokens(fresh)
        return counts
