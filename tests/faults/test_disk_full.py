"""Disk full (threat model row 32), through the real Telegram path: SQLite's own size limit
(``PRAGMA max_page_count``) makes every write fail with SQLITE_FULL, as a full disk does.

Inbound is not acknowledged (the offset stays, Telegram delivers again), each chat gets at
most one notice, the log says what to do once, and when space is back the messages are taken
in by themselves and answered exactly once. A turn whose answer is ready when the disk fills
keeps that answer until it can be committed, and delivers it exactly once."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
from pathlib import Path

import pytest

from gateway.runtime.app import Gateway
from gateway.runtime.intake.storage_full import NOTICE
from gateway.store import Store
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, held, text
from tests.fakes.telegram import FakeTelegram, fast_channel, section

UNLIMITED_PAGES = 1073741823


channel = fast_channel


async def fill_disk(store: Store) -> int:
    """Freeze the store at its current size; returns how many bytes a message must have to
    need more pages than the free ones left inside it."""

    def freeze(conn: sqlite3.Connection) -> int:
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return int((free + 4) * size * 2)

    return await store.db.run(freeze)


async def free_disk(store: Store) -> None:
    await store.db.run(lambda conn: conn.execute(f"PRAGMA max_page_count = {UNLIMITED_PAGES}"))


async def test_disk_full_holds_messages_unacknowledged_tells_once_and_resumes(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_llm.responder = lambda request: text(f"got {request.last_user_text.split()[0]}")
    settings = make_settings(telegram=section(tg, allow_from=["42", "43"]))
    caplog.set_level(logging.INFO)
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("before")
        await tg.wait_sent(1)
        await gateway.wait_idle()
        padding = "p" * await fill_disk(gateway.store)
        first = await tg.say(f"one {padding}")
        await tg.say(f"two {padding}")
        other = await tg.say(f"three {padding}", chat_id=43, user_id=43, first_name="Eli")
        # one notice per chat, however often Telegram delivers the messages again
        await tg.wait_sent(3)
        calls = len(tg.called("getUpdates"))
        await tg.wait_called("getUpdates", calls + 5)
        assert tg.confirmed_offset <= first["update_id"]  # nothing acknowledged
        assert len(fake_llm.requests) == 1  # no turn for a message that is not journaled
        await free_disk(gateway.store)
        await tg.wait_confirmed(other["update_id"] + 1)
        await tg.wait_for(lambda: "got two" in tg.texts(42) and "got three" in tg.texts(43))
        await gateway.wait_idle()
    # one notice per chat, then each message answered once (chat 42's two may share a turn)
    assert tg.texts(43) == [NOTICE, "got three"]
    assert tg.texts(42)[:2] == ["got before", NOTICE]
    assert tg.texts(42)[2:] in (["got one", "got two"], ["got two"])
    asked = [text for request in fake_llm.requests[1:] for text in request.user_texts]
    assert (
        sum(t.startswith("one ") for t in asked) >= 1
        and sum(t.startswith("two ") for t in asked) >= 1
    )
    errors = [r for r in caplog.records if "storage full:" in r.getMessage()]
    assert [r.levelno for r in errors if "no room" in r.getMessage()] == [logging.ERROR]
    assert str(settings.data_dir) in errors[0].getMessage()
    assert "Free space" in errors[0].getMessage()
    assert sum("storage writable again" in r.getMessage() for r in caplog.records) == 1
    assert gateway.bus.storage_full.outages == 1
    # Telegram's updates were fetched again at every try: the log did not say so each time
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("not accepted" in said for said in warned) == 1, warned
    assert sum("store transaction failed" in said for said in warned) <= 1, warned
    assert "telegram: updates are accepted again" in caplog.messages


# A process whose files may not grow past 4 KB writes its log file until that fails (as on
# a full disk), then the file is emptied (space freed) and it logs one more line.
LOG_ON_A_FULL_DISK = """
import logging, os, resource, sys
from pathlib import Path
from gateway.core.system.logs import LogFile

path = Path(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
handler = LogFile(path)
log = logging.getLogger("full")
log.addHandler(handler)
for number in range(200):
    log.warning("store transaction failed: the disk is full (%d)", number)
os.truncate(path, 0)
log.warning("space is back")
"""


async def test_a_log_file_that_cannot_be_written_is_said_once_not_a_traceback_a_line(
    tmp_path: Path,
) -> None:
    """Before: "--- Logging error ---" and a traceback on the standard error for each line
    (100 lines a second under a disk-full outage, into the journal on the same disk)."""
    path = tmp_path / "switchboard.log"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOG_ON_A_FULL_DISK, str(path), stderr=asyncio.subprocess.PIPE
    )
    _, raw = await asyncio.wait_for(process.communicate(), 60)
    err = raw.decode()
    assert process.returncode == 0, err
    assert err.splitlines() == [
        f"switchboard: cannot write the log file {path} (File too large); its lines are lost "
        "until it can be written again",
        f"switchboard: writing the log file {path} again",
    ]
    assert "space is back" in path.read_text()


async def test_disk_full_mid_turn_keeps_the_answer_and_delivers_it_once_when_space_is_back(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # room for a long answer: it is cut at max_tokens × 12 characters (docs/reliability.md)
    settings = make_settings(telegram=section(tg), llm={"max_tokens": 16_384})
    caplog.set_level(logging.INFO)
    async with Gateway(settings, channels=[channel(settings)]) as gateway:
        await tg.say("warm up")
        await tg.wait_sent(1)
        await gateway.wait_idle()
        size = await fill_disk(gateway.store)  # measure what no longer fits, then free it
        await free_disk(gateway.store)
        words = size // 7
        answer = " ".join(f"word{i}" for i in range(words))  # more than the room left
        gate = asyncio.Event()
        fake_llm.queue(held(gate, answer))
        await tg.say("a long question")
        await fake_llm.wait_for_requests(2)  # the model is answering
        await fill_disk(gateway.store)
        gate.set()
        # the answer is ready but cannot be stored: the turn waits for space, keeping it
        await asyncio.wait_for(gateway.bus.storage_full.outage.wait(), 10)
        assert tg.texts(42) == ["echo: warm up"]  # nothing sent from an uncommitted turn
        await free_disk(gateway.store)
        await tg.wait_for(lambda: "word0" in "".join(tg.texts(42)[1:]))
        await gateway.wait_idle()
        await tg.wait_for(lambda: f"word{words - 1}" in "".join(tg.texts(42)))
    parts = tg.texts(42)[1:]
    assert " ".join(parts).split() == answer.split()  # every word once, in order
    assert len(fake_llm.requests) == 2  # the answer was kept, not asked for again
    errors = [r for r in caplog.records if "storage full:" in r.getMessage()]
    assert [r.levelno for r in errors] == [logging.ERROR]
    assert "finished answers wait to be stored" in errors[0].getMessage()
    assert sum("storage writable again" in r.getMessage() for r in caplog.records) == 1
    assert gateway.bus.storage_full.outages == 1
