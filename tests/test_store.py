"""The durable store: dedup, atomic turn commits, idempotent outbox, per-chat order.

Every test taking ``make_store`` runs on SQLite and on PostgreSQL (tests/backends.py)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from gateway.core.errors import StorageFullError, StoreError
from gateway.core.messages import InboundMessage, OutboundMessage
from gateway.store import NewMessage, Store
from gateway.store.engine.sql import Connection
from tests.backends import StoreFactory


def inbound(platform_id: str, text: str = "hi", chat: str = "c1") -> InboundMessage:
    return InboundMessage(
        channel="t", chat_id=chat, sender_id="u", text=text, platform_message_id=platform_id
    )


def outbound(key: str, text: str, chat: str = "c1", turn: str | None = None) -> OutboundMessage:
    return OutboundMessage(channel="t", chat_id=chat, text=text, idempotency_key=key, turn_id=turn)


async def test_inbound_is_deduplicated_across_restarts(make_store: StoreFactory) -> None:
    async with make_store() as store:
        first = await store.journal.accept(inbound("7"))
        assert first is not None
    async with make_store() as store:
        assert await store.journal.accept(inbound("7")) is None
        work = await store.journal.open_work()
    assert [r.message.text for r in work.pending] == ["hi"]


async def test_commit_turn_is_all_or_nothing(make_store: StoreFactory) -> None:
    async with make_store() as store:
        record = await store.journal.accept(inbound("1"))
        assert record is not None
        await store.journal.start_turn("turn-1", record.session_key, "chat", [record.id])
        await store.history.add_checkpoints(
            record.session_key, "turn-1", [NewMessage("user", {"role": "user", "content": "hi"})]
        )
        work = await store.journal.open_work()
        assert [t.id for t in work.running] == ["turn-1"]
        assert (await store.history.load(record.session_key, limit=10))[
            1
        ] == []  # drafts are not history yet

        await store.commit_turn(
            turn_id="turn-1",
            session_key=record.session_key,
            replies=[outbound("turn-1:reply", "hello", turn="turn-1")],
        )
        work = await store.journal.open_work()
        assert work.running == () and work.pending == ()
        _, messages = await store.history.load(record.session_key, limit=10)
        assert [m.body["content"] for m in messages] == ["hi"]
        assert [r.message.text for r in await store.outbox.heads("t")] == ["hello"]


async def test_outbox_stores_each_idempotency_key_once(make_store: StoreFactory) -> None:
    async with make_store() as store:
        assert await store.outbox.enqueue([outbound("k1", "a")]) == 1
        assert await store.outbox.enqueue([outbound("k1", "a again")]) == 0
        assert await store.outbox.pending_count() == 1


async def test_outbox_keeps_order_per_chat(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await store.outbox.enqueue(
            [outbound("1", "a1", "a"), outbound("2", "a2", "a"), outbound("3", "b1", "b")]
        )
        heads = await store.outbox.heads("t")
        assert [h.message.text for h in heads] == ["a1", "b1"]
        await store.outbox.mark_sent(heads[0].id)
        assert [h.message.text for h in await store.outbox.heads("t")] == ["a2", "b1"]


async def test_unsent_messages_say_what_keeps_each(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await store.outbox.enqueue(
            [outbound("1", "a1", "a"), outbound("2", "a2", "a"), outbound("3", "b1", "b")]
        )
        first, other = await store.outbox.heads("t")
        await store.outbox.retry_later(first.id, 30, "502 Bad Gateway")
        await store.outbox.mark_sent(other.id)
        unsent = await store.outbox.unsent()
    assert [(m.attempts, m.last_error, m.behind) for m in unsent] == [
        (1, "502 Bad Gateway", False),
        (0, None, True),  # behind a1, in the same chat
    ]
    assert unsent[0].due_at > unsent[1].due_at


async def test_tool_ledger_records_intent_once(make_store: StoreFactory) -> None:
    async with make_store() as store:
        assert await store.ledger.start("turn:call", "send_email") is True
        assert await store.ledger.start("turn:call", "send_email") is False
        entry = await store.ledger.get("turn:call")
        assert entry is not None and entry.state == "started"
        await store.ledger.finish("turn:call", "sent")
        entry = await store.ledger.get("turn:call")
        assert entry is not None and (entry.state, entry.result) == ("done", "sent")


async def test_a_failing_job_does_not_undo_its_batch_neighbours(make_store: StoreFactory) -> None:
    async with make_store() as store:

        def broken(conn: Connection) -> None:
            conn.execute("INSERT INTO no_such_table VALUES (1)")

        results = await asyncio.gather(
            store.outbox.enqueue([outbound("x", "kept")]),
            store.db.run(broken),
            return_exceptions=True,
        )
        assert results[0] == 1 and isinstance(results[1], Exception)
        assert await store.outbox.pending_count() == 1


async def test_usage_of_older_stores_is_kept_when_calls_get_purposes(tmp_path: Path) -> None:
    """Schema v8 turns one usage row per turn into rows per purpose; old rows become 'turn'."""
    import sqlite3

    from gateway.store.engine.schema import MIGRATIONS

    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for number, script in enumerate(MIGRATIONS[:7], start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.execute(
        "INSERT INTO usage (turn_id, session_key, channel, at, model, input_tokens,"
        " output_tokens, cache_read_tokens, cache_write_tokens, principal)"
        " VALUES ('t1', 't:c1', 't', strftime('%s', 'now'), 'm', 30, 12, 0, 0, 't:u')"
    )
    conn.close()
    async with Store(path) as store:
        [day] = await store.usage.since(3_600)
        person = await store.usage.by_principal("t:u", since=0, turns_since=0)
        purposes = await store.db.run(
            lambda c: c.execute("SELECT id, purpose FROM usage").fetchall()
        )
    assert (day.turns, day.input_tokens, day.output_tokens) == (1, 30, 12)
    assert (person.tokens, person.turns) == (42, 1)
    assert purposes == [("t1:turn:m", "turn")]


def modes(files: list[Path]) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}


def left_readable(files: list[Path]) -> None:
    """What an older version left behind: the database and its WAL readable by everyone."""
    for p in files:
        if not p.exists():
            p.touch()
        p.chmod(0o644)


async def test_the_database_and_its_wal_files_are_private(tmp_path: Path) -> None:
    """Conversations live in these files: only the gateway's user may read them."""
    old = os.umask(0o022)
    path = tmp_path / "db.sqlite"
    files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    try:
        async with Store(path) as store:
            await store.journal.accept(inbound("1"))
            assert modes(files) == {p.name: 0o600 for p in files}
        left_readable(files[:2])
        async with Store(path) as store:  # made private at the next start
            await store.journal.accept(inbound("2"))
            assert modes(files) == {p.name: 0o600 for p in files}
    finally:
        os.umask(old)


async def test_only_checkpoints_commit_without_an_fsync(tmp_path: Path) -> None:
    """Accepted messages and committed turns reach the disk before anyone is told; a
    transaction holding only checkpoints (``durable=False``) does not wait for the disk,
    and nothing is synced more strongly than ``storage.synchronous`` says."""

    def sync_level(conn: sqlite3.Connection) -> int:  # 2 = FULL (fsync), 1 = NORMAL
        return int(conn.execute("PRAGMA synchronous").fetchone()[0])

    async with Store(tmp_path / "full.sqlite") as store:
        levels = [
            await store.db.run(sync_level, durable=False),
            await store.db.run(sync_level),
            await store.db.run(sync_level, durable=False),
        ]
        together = await asyncio.gather(  # one transaction: the durable job decides
            store.db.run(sync_level, durable=False), store.db.run(sync_level)
        )
    async with Store(tmp_path / "normal.sqlite", synchronous="normal") as store:
        relaxed = await store.db.run(sync_level)
    assert levels == [1, 2, 1]
    assert together == [2, 2]
    assert relaxed == 1


async def test_a_job_is_never_reported_done_when_its_writes_are_not_kept(
    make_store: StoreFactory,
) -> None:
    """A job that swallows a failed statement: SQLite keeps the statement before it,
    PostgreSQL cannot (the transaction is aborted), so there the job must fail, not report
    success over writes that were rolled back."""

    def swallows(conn: Connection) -> str:
        conn.execute("INSERT INTO kv (key, value, updated_at) VALUES ('kept', '1', 0)")
        try:
            conn.execute("INSERT INTO kv (key, value, updated_at) VALUES ('dup', '1', 0)")
        except Exception:
            return "claims success"
        return "no error"

    async with make_store() as store:
        await store.db.run(
            lambda conn: conn.execute(
                "INSERT INTO kv (key, value, updated_at) VALUES ('dup', '0', 0)"
            )
        )
        try:
            answer: str | None = await store.db.run(swallows)
        except StoreError:
            answer = None
        rows = await store.db.run(
            lambda conn: conn.execute("SELECT key FROM kv WHERE key = 'kept'").fetchall()
        )
    assert (answer == "claims success") == (len(rows) == 1)


async def test_the_writer_survives_a_job_that_fails_after_the_disk_filled(
    tmp_path: Path,
) -> None:
    """SQLite undoes a whole batch on a full disk; a job that turns that error into its own
    must not take the writer thread down (every later write would wait forever)."""
    async with Store(tmp_path / "db.sqlite") as store:
        (pages,) = await store.db.run(lambda conn: conn.execute("PRAGMA page_count").fetchone())
        await store.db.run(lambda conn: conn.execute(f"PRAGMA max_page_count = {pages}"))

        def small(conn: Connection) -> str:
            conn.execute("INSERT INTO kv (key, value, updated_at) VALUES ('s', '1', 0)")
            return "ok"

        def hides_the_full_disk(conn: Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO kv (key, value, updated_at) VALUES ('big', ?, 0)", ("x" * 200_000,)
                )
            except sqlite3.Error as exc:
                raise RuntimeError("a job's own error") from exc

        outcomes = await asyncio.wait_for(
            asyncio.gather(
                store.db.run(small), store.db.run(hides_the_full_disk), return_exceptions=True
            ),
            10,
        )
        assert all(isinstance(o, StoreError) for o in outcomes) or outcomes[0] == "ok"
        await store.db.run(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))
        assert await asyncio.wait_for(store.db.run(small), 10) == "ok"  # still writing


async def test_a_full_disk_is_warned_about_once_per_outage_not_at_every_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """While the disk is full every write fails, and a poller tries again each second: the
    store warns once per outage (before: at every batch, about once a second)."""
    async with Store(tmp_path / "db.sqlite") as store:
        (pages,) = await store.db.run(lambda conn: conn.execute("PRAGMA page_count").fetchone())

        def fill(conn: Connection) -> None:
            conn.execute(f"PRAGMA max_page_count = {pages}")

        def big(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO kv (key, value, updated_at) VALUES (?, ?, 0)",
                (os.urandom(8).hex(), "x" * 200_000),
            )

        async def writes_in_one_batch() -> list[object]:
            """Three writes queued while the writer waits: they run as one batch."""
            gate = threading.Event()
            held = asyncio.ensure_future(store.db.run(lambda conn: gate.wait(10)))

            async def release() -> None:
                gate.set()

            *outcomes, _ = await asyncio.gather(
                *(store.db.run(big) for _ in range(3)), release(), return_exceptions=True
            )
            await asyncio.gather(held, return_exceptions=True)  # in the batch, or alone before
            return outcomes

        def warned() -> int:
            return sum("store transaction failed" in said for said in caplog.messages)

        await store.db.run(fill)
        for _ in range(3):
            assert all(isinstance(o, StorageFullError) for o in await writes_in_one_batch())
        assert warned() == 1
        await store.db.run(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))
        await store.db.run(lambda conn: conn.execute("DELETE FROM kv"))  # space is back
        await store.db.run(fill)  # and gone again: a second outage
        assert all(isinstance(o, StorageFullError) for o in await writes_in_one_batch())
        assert warned() == 2


async def test_what_a_cluster_node_reads_to_take_a_session(make_store: StoreFactory) -> None:
    async with make_store() as store:
        for platform_id, chat in (("1", "a"), ("2", "b"), ("3", "a"), ("4", "b")):
            await store.journal.accept(inbound(platform_id, f"m{platform_id}", chat))
        pending = await store.journal.pending()
        assert [r.message.text for r in pending] == ["m1", "m2", "m3", "m4"]
        # a session's turn starts with its first message; a node then dies in it
        await store.journal.start_turn("turn-a", "t:a", "chat", [pending[0].id])
        await store.journal.accept(inbound("5", "m5", "b"))
        known = {r.id: r for r in pending}
        again = await store.journal.pending(known=known)  # read once, decoded once
        assert [r.message.text for r in again] == ["m2", "m3", "m4", "m5"]
        assert again[0] is known[again[0].id] and again[-1].id not in known
        assert await store.journal.running_sessions() == ["t:a"]
        work = await store.journal.session_work("t:a", ["t:a"])
        assert [t.id for t in work.running] == ["turn-a"]
        assert [r.message.text for r in work.running[0].records] == ["m1"]
        assert [r.message.text for r in work.pending] == ["m3"]
        other = await store.journal.session_work("t:b", ["t:b"])
        assert not other.running and [r.message.text for r in other.pending] == ["m2", "m4", "m5"]


async def test_a_read_sees_every_write_that_returned_and_cannot_write(
    make_store: StoreFactory,
) -> None:
    """``db.read`` (on SQLite, on the caller's thread) sees what each finished ``run``
    committed, and refuses to change anything."""
    async with make_store() as store:
        for key in ("a", "b"):
            await store.outbox.enqueue([outbound(key, key.upper())])
            heads = await store.outbox.heads("t")
            assert [h.message.text for h in heads] == ["A"]  # order per chat: the oldest
        count = await store.db.read(lambda c: c.execute("SELECT COUNT(*) FROM outbox").fetchone())
        assert count[0] == 2
        if store.db.dialect.name == "sqlite":
            try:
                await store.db.read(lambda c: c.execute("DELETE FROM outbox"))
            except StoreError as exc:
                assert "readonly" in str(exc)
            else:
                raise AssertionError("a read deleted the outbox")
        assert (await store.db.run(lambda c: c.execute("SELECT COUNT(*) FROM outbox").fetchone()))[
            0
        ] == 2


async def test_reads_do_not_wait_for_the_writer_on_sqlite(tmp_path: Path) -> None:
    """A turn's reads (its history, the next message to send) go on while the writer is
    busy with a long transaction: they never queue behind it on SQLite."""
    release = threading.Event()
    async with Store(tmp_path / "store.sqlite") as store:
        await store.history.add_checkpoints("s1", "t1", [NewMessage("user", {"content": "hi"})])
        busy = asyncio.ensure_future(store.db.run(lambda _: release.wait(30)))
        try:
            state, messages = await asyncio.wait_for(store.history.load("s1", limit=None), 10)
            assert state.generation >= 0 and messages == []  # a draft is not history yet
            assert not busy.done()
        finally:
            release.set()
        assert await busy
