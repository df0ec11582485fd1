"""Summarization of long conversations (AI Legion's rules, Mini-Agent's round condensing).

When a session's prompt passes 75% of the context window, its older messages are
summarized by the model into the session summary, which then replaces them in the prompt:

- at least 3 recent messages are kept, and at least half of the older ones summarized;
- the cut lands on a user message, so no tool call is split from its result;
- the word limit follows from the budget; the summary is kept only if it saves tokens;
- before the summary replaces them, the lasting facts the model finds in them are saved
  to the scope's memory (today's note), on every path: in the background, before a turn's
  first call (near the window), after a provider's "context too long", and ``/compact``;
- the person's own messages stay word for word beside the summary, the newest first, within
  ``memory.quote_share`` of the window (:func:`quotes`); the summary covers the rest;
- nothing is deleted: summarized messages stay on disk and searchable (``memory_search``).

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
from datetime import datetime

from agent.llm.metered import Charge, WindowSize
from agent.llm.types import ChatMessage
from agent.tokens import TokenCounter, estimate
from gateway.store import History, StoredMessage
from gateway.store.history import without_guidance

log = logging.getLogger(__name__)

# (prompt, who pays) -> the summary
Summarize = Callable[[str, Charge], Awaitable[str]]
# (lasting facts, whether they came from a part that held outside content) -> saved in the
# conversation's memory scope (agent/agent.py), before the summary replaces their messages
SaveFacts = Callable[[Sequence[str], bool], Awaitable[None]]

THRESHOLD = 0.75  # compact when the prompt passes this share of the window
TARGET = 0.45  # and bring it down to about this share
PREFLIGHT = 0.85  # a prompt above this share is compacted before it is sent
MIN_KEEP = 3
QUOTE_CHARS = 1_500  # one quoted message at most (a pasted document: its start and end)
FACTS = "FACTS:"

SUMMARY_PROMPT = """\
Below is the earlier part of a conversation between you (the assistant) and the user{previous}.
Write a summary of it in at most {words} words, for your own future reference. Keep every \
fact the user stated (names, dates, numbers, preferences, decisions), open tasks and \
promises, and results you found. Plain text in the second person ("You told the user..."), \
no preamble.

Then write a line with only "{facts}" and under it the lasting facts about the user worth \
remembering beyond this conversation (preferences, people, places, dates, decisions), one \
per line starting with "- ", or nothing when there are none.

{transcript}"""


def split_facts(answer: str) -> tuple[str, list[str]]:
    """The summary, and the lasting facts listed after it (under a line ``FACTS:``)."""
    lines = answer.strip().splitlines()
    for index, line in enumerate(lines):
        if line.strip().upper() == FACTS:
            listed = (item.strip() for item in lines[index + 1 :])
            facts = [
                item[2:].strip() for item in listed if item.startswith("- ") and item[2:].strip()
            ]
            return "\n".join(lines[:index]).strip(), facts
    return answer.strip(), []


def quotes(said: Sequence[tuple[float, str]], budget: int) -> str | None:
    """The person's own messages ((time, text) each, oldest first) word for word, as many of
    the newest as fit in ``budget`` tokens (estimated), oldest first; ``None`` for none."""
    kept: list[str] = []
    used = 0
    for at, text in reversed(said):
        line = cut_middle(without_guidance(text).strip(), QUOTE_CHARS)
        if not line:
            continue
        day = datetime.fromtimestamp(at).astimezone()
        entry = f"- {day:%d %b}: " + "\n  ".join(line.splitlines())
        used += estimate(entry)
        if used > budget:
            break
        kept.append(entry)
    return "\n".join(reversed(kept)) or None


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
        quote_share: float = 0.1,
    ) -> None:
        self._history = history
        self._summarize = summarize
        self._counter = counter
        # shared with the model (MeteredModel): lowered when its server names a smaller one
        self.size = window if isinstance(window, WindowSize) else WindowSize(window)
        self.max_messages = max_messages  # the history cap per prompt (agent.history_max_messages)
        self._time_budget = time_budget
        self.quote_share = quote_share  # memory.quote_share: the person's words kept
        self._running: dict[str, asyncio.Task[Compaction | None]] = {}
        self._again: dict[str, tuple[int, Charge, SaveFacts | None]] = {}

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

    def schedule(
        self, session_key: str, overhead: int, charge: Charge, save: SaveFacts | None = None
    ) -> None:
        """Compact in the background if needed; one run per session at a time (a request
        that arrives during a run is remembered and runs right after it)."""
        if session_key in self._running:
            self._again[session_key] = (overhead, charge, save)
            return
        task = asyncio.create_task(
            self._guarded(session_key, overhead, charge, save), name=f"compact:{session_key}"
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

    async def _guarded(
        self, session_key: str, overhead: int, charge: Charge, save: SaveFacts | None
    ) -> Compaction | None:
        try:
            async with asyncio.timeout(self._time_budget):
                return await self.compact(session_key, overhead, charge=charge, save=save)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never blocks or breaks the session; the next turn retries
            log.warning("summarizing %s failed: %s", session_key, exc)
            return None

    async def compact(
        self,
        session_key: str,
        overhead: int,
        *,
        force: bool = False,
        charge: Charge,
        save: SaveFacts | None = None,
    ) -> Compaction | None:
        """Summarize the older part of the session if it is due (or ``force``); ``save``
        keeps the lasting facts found in that part, before the summary replaces it."""
        state, stored = await self._history.load(session_key, limit=None)
        summary_tokens = estimate(state.summary or "") + estimate(state.summary_quotes or "")
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
        quote_budget = int(self.window * self.quote_share)
        cut = choose_cut(
            tokens,
            [m.role for m in stored],
            overhead=overhead,
            target=int(self.window * TARGET) - quote_budget,
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
            previous=previous, words=words, facts=FACTS, transcript=render_transcript(older)
        )
        summary, facts = split_facts(await self._summarize(prompt, charge))
        upto = stored[cut - 1].id
        said = await self._history.said(session_key, upto) if quote_budget else []
        quoted = quotes(said, quote_budget)
        replaced = sum(tokens[:cut]) + summary_tokens
        after = self._counter.count(summary) + (self._counter.count(quoted) if quoted else 0)
        kept = bool(summary) and after < replaced
        if kept:
            if facts and save is not None:
                try:
                    await save(facts, any(m.untrusted for m in older))
                except Exception as exc:  # the messages stay searchable: nothing is lost
                    log.warning("saving facts before summarizing %s failed: %s", session_key, exc)
            await self._history.set_summary(session_key, summary, upto, quoted)
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
