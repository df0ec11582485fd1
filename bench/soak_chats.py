"""The soaks' users and what their chats show (bench/soak.py, one process; bench/soak_cluster.py,
node processes): both judge a run by what each chat finally shows, never by the calls made,
so a draft edited into its answer counts once and a draft left beside it counts twice.

Users (one per chat) write, wait for the answer, pause 0.5-3 s and write again: short texts,
long ones (3,000 characters), markdown, ``/status``. Each message starts with ``chat-n`` so
an answer tells which message it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

from channels.telegram.render import render
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram

ANSWER_TIMEOUT = 180.0  # a user gives up waiting after this (counted as unanswered)
LONG = " ".join(f"word{i}" for i in range(500))  # about 3,000 characters


def next_text(chat: int, n: int) -> str:
    """The user's next message: short, long, markdown or ``/status``."""
    roll = random.random()
    if roll < 0.05:
        return "/status"
    if roll < 0.15:
        return f"{chat}-{n} {LONG}"
    if roll < 0.30:
        return f"{chat}-{n} **bold** _it_ `code` [link](https://example.com)"
    return f"{chat}-{n} hello there"


@dataclass
class Verdict:
    """What one chat shows against what its user wrote."""

    answered: int = 0
    lost: int = 0
    doubled: int = 0
    unfinished: int = 0  # only a draft shows for a message (never completed)
    notices: list[str] = field(default_factory=list)  # shown, neither an echo nor /status


def latency(waits: Sequence[float]) -> str:
    """Median, 95th and 99th percentile and the longest wait for an answer, in seconds (the
    user sees an answer when it is complete, or its first draft when streamed)."""
    if not waits:
        return "no answers"
    ordered = sorted(waits)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return (
        f"p50 {at(0.5):.2f} s, p95 {at(0.95):.2f} s, p99 {at(0.99):.2f} s,"
        f" max {ordered[-1]:.2f} s over {len(ordered)} answers"
    )


def expected(text: str) -> str:
    """What the chat shows for the echo of ``text`` once complete (markdown rendered)."""
    return render(f"echo: {text}")[0].text


def echo_index(shown: str, chat: int) -> int | None:
    """Which of the chat's messages an echo (complete or a draft) answers."""
    prefix = f"echo: {chat}-"
    if not shown.startswith(prefix):
        return None
    number = shown[len(prefix) :].split(" ", 1)[0]
    return int(number) if number.isdigit() else None


def judge(chat: int, texts: list[str], shown: list[str]) -> Verdict:
    verdict = Verdict()
    echoes: dict[int, list[str]] = defaultdict(list)
    others: list[str] = []
    for message in shown:
        index = echo_index(message, chat)
        if index is None:
            others.append(message)
        else:
            echoes[index].append(message)
    statuses = sum(text == "/status" for text in texts)
    missing = 0
    for index, text in enumerate(texts):
        if text == "/status":
            continue
        replies = echoes.get(index, [])
        if not replies:
            missing += 1
        elif expected(text) not in replies:
            verdict.unfinished += 1
        else:
            verdict.answered += 1
        verdict.doubled += max(0, len(replies) - 1)
    # /status answers and notices (a turn that failed) are the other messages
    verdict.answered += min(statuses, len(others))
    spare = len(others) - statuses  # > 0: notices; < 0: /status unanswered
    verdict.lost = max(0, missing + verdict.unfinished - max(0, spare))
    verdict.doubled += max(0, spare - missing - verdict.unfinished)
    verdict.notices = others if spare > 0 else []
    return verdict


class Shown:
    """Which messages each chat holds, indexed from the fake's calls (then pruned), so what
    a chat shows is read without sorting every chat's messages."""

    def __init__(self, tg: FakeTelegram) -> None:
        self.tg = tg
        self.ids: dict[int, set[int]] = defaultdict(set)
        self.changed: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self.edits = 0

    def collect(self) -> None:
        for call in self.tg.calls:
            if not call.params.get("_ok") or "chat_id" not in call.params:
                continue
            chat = int(call.params["chat_id"])
            if call.method == "sendMessage" and isinstance(call.result, dict):
                self.ids[chat].add(int(call.result["message_id"]))
            elif call.method == "editMessageText":
                self.edits += 1
            self.changed[chat].set()
        self.tg.calls.clear()
        self.tg.refused.clear()
        self.tg.pushed_at.clear()

    def visible(self, chat: int) -> list[str]:
        return [
            self.tg.chat[(chat, mid)][0]
            for mid in sorted(self.ids[chat])
            if (chat, mid) in self.tg.chat
        ]


class Conversations:
    """The users of a soak: what each wrote, what each chat shows, and the last answered
    update of each chat (to deliver again)."""

    def __init__(self, tg: FakeTelegram, llm: FakeLLM, stop: asyncio.Event) -> None:
        self.tg = tg
        self.llm = llm
        self.stop = stop
        self.shown = Shown(tg)
        self.sent: dict[int, list[str]] = defaultdict(list)
        self.answered_updates: dict[int, dict[str, Any]] = {}
        self.waits: list[float] = []  # seconds from a message to its answer showing

    def answered(self, chat: int, text: str, others_before: int) -> bool:
        shown = self.shown.visible(chat)
        others = sum(echo_index(s, chat) is None for s in shown)
        if others > others_before:  # the /status answer, or a notice
            return True
        return text != "/status" and expected(text) in shown

    async def user(self, chat: int) -> None:
        for n in itertools.count():
            if self.stop.is_set():
                return
            text = next_text(chat, n)
            shown = self.shown.visible(chat)
            others_before = sum(echo_index(s, chat) is None for s in shown)
            self.sent[chat].append(text)
            said = time.monotonic()
            update = await self.tg.say(text, chat_id=chat, user_id=chat)
            deadline = said + ANSWER_TIMEOUT
            changed = self.shown.changed[chat]
            while time.monotonic() < deadline:
                changed.clear()
                if self.answered(chat, text, others_before):
                    self.answered_updates[chat] = update
                    self.waits.append(time.monotonic() - said)
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)
            await asyncio.sleep(random.uniform(0.5, 3.0))

    async def collector(self) -> None:
        """Index what the chats show as the fake records it; prune the fake model's log."""
        while True:
            async with self.tg.changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.tg.changed.wait(), 0.5)
            self.shown.collect()
            if len(self.llm.requests) > 50:
                self.llm.requests.clear()

    async def converse(
        self, chats: int, minutes: float, faults: Awaitable[None], *, grace: float
    ) -> None:
        """``chats`` users write for ``minutes`` while ``faults`` are injected; then the fault
        under way ends, each user waits for its last answer, and ``grace`` seconds more leave
        room for a late duplicate to show before the chats are read a last time."""
        collecting = asyncio.create_task(self.collector())
        injecting = asyncio.ensure_future(faults)
        users = [asyncio.create_task(self.user(1_000 + i)) for i in range(chats)]
        try:
            await asyncio.sleep(minutes * 60)
            self.stop.set()
            await injecting  # a fault under way finishes (a restart, an outage ending)
            await asyncio.gather(*users)
            await asyncio.sleep(grace)
        finally:
            for task in (collecting, injecting, *users):
                task.cancel()
            await asyncio.gather(collecting, injecting, *users, return_exceptions=True)
        self.shown.collect()

    def verdicts(self) -> dict[int, Verdict]:
        return {chat: judge(chat, t, self.shown.visible(chat)) for chat, t in self.sent.items()}

    def total_sent(self) -> int:
        return sum(len(t) for t in self.sent.values())

    def total_answered(self) -> int:
        return sum(v.answered for v in self.verdicts().values())

    # -- the faults both soaks inject -----------------------------------------------------

    async def outage(self) -> None:
        """``bot-api-5xx``: the Bot API answers every call with 502 for 15 s."""
        await self.tg.go_down(502, "Bad Gateway")
        await asyncio.sleep(15)
        await self.tg.come_back()

    def flood(self) -> int:
        """``flood-429``: one chat's next send gets 429 with ``retry_after`` 20; which."""
        chat = random.choice(list(self.sent) or [1])
        self.tg.fail("sendMessage", 429, "Too Many Requests", retry_after=20, chat_id=chat)
        return chat


async def schedule(
    kinds: Sequence[str], every: float, started: float, stop: asyncio.Event
) -> AsyncIterator[str]:
    """The fault kinds in turn, the first at ``every``/2 after ``started`` and then every
    ``every`` seconds (a fault under way delays none of the later ones), until ``stop``."""
    for index in itertools.count():
        due = started + every / 2 + index * every
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, due - time.monotonic()))
        if stop.is_set():
            return
        yield kinds[index % len(kinds)]
