"""Many answers lost at once: ``switchboard run`` killed while every chat's answer is on its
way to the fake Bot API, then started again. Shared by the test
(tests/faults/test_lost_sends.py) and the benchmark (bench/lost_sends.py), so both kill and
count the same way.

Every chat's answer (or, streaming, its draft's first post) has been recorded as being sent:
the first of them are held by the fake, made and never answered (as many as the channel has
connections to the Bot API: 16); the others wait for one of those connections and were
never made. Once all are recorded the process is SIGKILLed; the restart settles them all
(channels/telegram/recovery.py). What is measured is what a person would notice: every chat
shows its answer exactly once, and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from channels.telegram.recovery import MessageIds
from gateway.core.channel import SendAttempt
from gateway.core.messages import OutboundMessage
from gateway.store import Store
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.nodes import STREAMING, spawn, telegram_env, written_echo
from tests.test_cli import switchboard

FIRST_CHAT = 1001
CONNECTIONS = 16  # the channel's connections to the Bot API (channels/telegram/adapter.py)
PROBE = "editMessageReplyMarkup"


@dataclass(frozen=True)
class Settled:
    chats: int
    never_made: int  # answers the fake never made (the others arrived unheard)
    seconds: float  # from the restart's spawn until every chat showed its answer once
    after_ready: float  # ... from the moment it said it was ready
    probes: int  # editMessageReplyMarkup calls after the restart
    sends: int  # messages made after the restart (sendMessage)
    doubled: list[int]  # chats that show something else than their answer, once


def answer(chat: int) -> str:
    return f"echo: hello {chat}"


def log_of(env: dict[str, str]) -> Path:
    """Where the gateway's log (its stderr) goes: a failure shows its end."""
    return Path(env["SWITCHBOARD_HOME"]) / "gateway.log"


async def start(env: dict[str, str]) -> tuple[asyncio.subprocess.Process, asyncio.Event]:
    """``switchboard run`` with its stdout watched for the ready line."""
    with log_of(env).open("ab") as log:  # the child keeps its own copy of the descriptor
        process = await spawn(env, log)
    ready = asyncio.Event()

    async def watch() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            if line.decode().endswith("ready\n"):
                ready.set()

    asyncio.get_running_loop().create_task(watch())
    return process, ready


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    await asyncio.wait_for(process.wait(), 60)


def unsettled(db: Path) -> int:
    """Answers the gateway of ``db`` (another process) has not recorded as delivered."""
    with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')"
        ).fetchone()
    return int(count)


def under_way(db: Path) -> int:
    """Sends and draft posts the gateway of ``db`` (another process) recorded as under way."""
    with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        (count,) = conn.execute(
            "SELECT (SELECT COUNT(*) FROM outbox WHERE state = 'sending')"
            " + (SELECT COUNT(*) FROM stream_drafts WHERE message_id IS NULL)"
        ).fetchone()
    return int(count)


def gateway_env(
    home: Path, fake_llm: FakeLLM, tg: FakeTelegram, *, chats: int, streaming: bool
) -> dict[str, str]:
    fake_llm.responder = written_echo  # written over 0.45 s: long enough to stream
    extra = {"SWITCHBOARD_LIMITS__MAX_CONCURRENT_TURNS": str(max(64, chats))}
    if streaming:
        extra.update(STREAMING)
    else:
        extra["SWITCHBOARD_TELEGRAM__STREAMING"] = "false"
    return telegram_env(home, fake_llm, tg, **extra)


async def kill_while_sending(
    home: Path,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    *,
    chats: int,
    streaming: bool,
    settle_within: float = 60.0,
) -> Settled:
    """Kill the gateway of ``home`` once the answers of ``chats`` chats are all under way
    (the first :data:`CONNECTIONS` made and unheard, the others never made), start it again
    and wait until every chat shows its answer. At most 200 chats: a gateway sends to that
    many chats at once (``Outbox.heads``)."""
    env = gateway_env(home, fake_llm, tg, chats=chats, streaming=streaming)
    await switchboard("onboard", env=env)
    ids = range(FIRST_CHAT, FIRST_CHAT + chats)
    holds = [tg.hold("sendMessage", deliver=True) for _ in range(min(chats, CONNECTIONS))]
    db = home / "data" / "switchboard.db"
    process, ready = await start(env)
    try:
        async with asyncio.timeout(60):
            await ready.wait()
        for chat in ids:
            await tg.say(f"hello {chat}", chat_id=chat, user_id=chat)
        async with asyncio.timeout(max(60.0, chats / 5)):
            for held in holds:
                await held.arrived.wait()
            while under_way(db) < chats:  # noqa: ASYNC110 - another process's store
                await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    for held in holds:
        held.release()
    return await restart(env, tg, ids, settle_within)


async def left_by_a_dead_process(
    home: Path,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    *,
    chats: int,
    made: int = CONNECTIONS,
    settle_within: float = 60.0,
) -> Settled:
    """What a process that died with ``chats`` answers under way leaves (built through the
    store and the fake, beyond the 200 one process sends at once): every answer recorded as
    being sent, the first ``made`` made by the fake and never heard of; then the gateway
    starts and settles them."""
    env = gateway_env(home, fake_llm, tg, chats=chats, streaming=False)
    await switchboard("onboard", env=env)
    ids = range(FIRST_CHAT, FIRST_CHAT + chats)
    dead = MessageIds()  # its attempts' marks: this machine, another process
    for chat in ids:
        dead.saw(chat, tg.message(f"hello {chat}", chat_id=chat, user_id=chat)["message_id"])
    answers = [OutboundMessage("telegram", str(c), answer(c)) for c in ids]
    async with Store(home / "data" / "switchboard.db") as store:
        await store.outbox.enqueue(answers)
        rows = {r.message.chat_id: r.id for r in await store.outbox.heads("telegram", limit=chats)}
        at = time.time() - 1.0  # the process died a second ago
        for message in answers:
            attempt = SendAttempt(at, dead.mark(message.chat_id))
            await store.outbox.mark_sending(rows[message.chat_id], attempt)
    for message in answers[:made]:  # they reached Telegram: nobody heard so
        tg.made_unheard(int(message.chat_id), message.text)
    return await restart(env, tg, ids, settle_within)


async def restart(
    env: dict[str, str], tg: FakeTelegram, ids: range, settle_within: float
) -> Settled:
    """Start the gateway again; wait until every chat shows its answer exactly once and
    the gateway knows it (nothing left to send)."""
    db = Path(env["SWITCHBOARD_HOME"]) / "data" / "switchboard.db"
    made = len([c for c in ids if tg.visible(c)])
    before = len(tg.calls)
    began = time.monotonic()
    process, ready = await start(env)
    try:
        async with asyncio.timeout(60):
            await ready.wait()
        ready_at = time.monotonic()
        try:
            async with asyncio.timeout(settle_within):
                await tg.wait_for(
                    lambda: all(tg.visible(c) == [answer(c)] for c in ids), settle_within
                )
                while unsettled(db):  # noqa: ASYNC110 - another process's store
                    await asyncio.sleep(0.05)
        except TimeoutError:  # what the people see and what the gateway said, for the failure
            wrong = {c: tg.visible(c) for c in ids if tg.visible(c) != [answer(c)]}
            said = log_of(env).read_text(errors="replace").splitlines()[-60:]
            raise AssertionError(
                f"not settled within {settle_within} s of ready: {len(wrong)} chats wrong "
                f"{wrong}, {unsettled(db)} answers unsent; the gateway's log ends:\n"
                + "\n".join(said)
            ) from None
        done = time.monotonic()
    finally:
        await stop(process)
    after = tg.calls[before:]
    return Settled(
        chats=len(ids),
        never_made=len(ids) - made,
        seconds=done - began,
        after_ready=done - ready_at,
        probes=sum(c.method == PROBE for c in after),
        sends=sum(c.method == "sendMessage" and bool(c.params.get("_ok")) for c in after),
        doubled=[c for c in ids if tg.visible(c) != [answer(c)]],
    )
