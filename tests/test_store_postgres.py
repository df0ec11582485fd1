"""PostgreSQL as the store (``storage.url``): the same schema as SQLite at every version, a
clear error when the server cannot be reached, a lost connection reopened, nodes migrating
one database together, and a whole gateway answering through it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.config.settings import load_settings
from gateway.core.errors import ConfigError, StaleClaim, StoreError, StoreUnavailable
from gateway.store import Store
from gateway.store.cluster.fencing import FENCE, Fence
from gateway.store.engine.schema import MIGRATIONS
from gateway.store.engine.schema_pg import PG_MIGRATIONS
from gateway.store.engine.sql import Connection
from tests.backends import require_server
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard

UNREACHABLE = "postgresql://switchboard:hunter2-secret@127.0.0.1:9/switchboard"


def sqlite_columns(path: Path) -> dict[str, set[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("messages_fts_")  # FTS5's own shadow tables
        ]
        return {t: {row[1] for row in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    finally:
        conn.close()


def pg_columns(url: str) -> dict[str, set[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public'"
        ).fetchall()
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set()).add(column)
    found.pop("schema_version")
    found.pop("cluster_nodes", None)  # who is alive now: not part of the numbered schema
    found["messages_fts"].discard("tsv")  # the search vector PostgreSQL keeps itself
    return found


async def test_both_engines_have_the_same_tables_and_columns(tmp_path: Path, pg_url: str) -> None:
    assert len(PG_MIGRATIONS) == len(MIGRATIONS)  # a new version is added to both
    async with Store(tmp_path / "db.sqlite"), Store(tmp_path / "unused", url=pg_url):
        pass
    assert pg_columns(pg_url) == sqlite_columns(tmp_path / "db.sqlite")
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (len(PG_MIGRATIONS),)
        ]


async def test_nodes_starting_together_migrate_the_database_once(
    tmp_path: Path, pg_url: str
) -> None:
    stores = [Store(tmp_path / f"n{i}", url=pg_url) for i in range(3)]
    await asyncio.gather(*(s.start() for s in stores))
    try:
        records = await asyncio.gather(
            *(s.kv.set(f"node-{i}", i) for i, s in enumerate(stores)),
        )
        assert records == [None, None, None]
        assert [await stores[0].kv.get(f"node-{i}") for i in range(3)] == [0, 1, 2]
    finally:
        await asyncio.gather(*(s.stop() for s in stores))


async def test_an_unreachable_server_is_a_clear_error_naming_storage_url(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable) as caught:
        async with Store(tmp_path / "unused", url=UNREACHABLE):
            pass
    message = str(caught.value)
    assert "storage.url" in message and "127.0.0.1:9" in message
    assert "hunter2" not in message


async def test_run_refuses_to_start_without_its_database(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = cli_env(tmp_path / "home", fake_llm, SWITCHBOARD_STORAGE__URL=UNREACHABLE)
    code, _, err = await switchboard("run", env=env)
    assert code == 1
    assert (
        "cannot reach PostgreSQL at storage.url = postgresql://switchboard:***@127.0.0.1:9" in err
    )
    assert "hunter2" not in err


def test_storage_url_must_name_postgresql(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_STORAGE__URL", "mysql://db/switchboard")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "storage.url" in str(caught.value) or caught.value.field == "storage.url"
    monkeypatch.setenv("SWITCHBOARD_STORAGE__URL", "postgresql://db/switchboard")
    assert load_settings().storage.database_url() == "postgresql://db/switchboard"


async def test_a_lost_connection_fails_that_moment_and_is_reopened(
    tmp_path: Path, pg_url: str
) -> None:
    async with Store(tmp_path / "unused", url=pg_url) as store:
        await store.kv.set("before", 1)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'switchboard store' AND datname = current_database()"
            )
        with pytest.raises(StoreUnavailable):
            await store.kv.set("during", 2)
        await store.kv.set("after", 3)  # a new connection
        assert [await store.kv.get(k) for k in ("before", "during", "after")] == [1, None, 3]


async def test_a_gateway_answers_through_postgresql(run_gateway: Any, pg_url: str) -> None:
    require_server()
    async with run_gateway(storage={"url": pg_url}) as (gateway, channel):
        await channel.push("hello there", message_id="m1")
        await channel.push("hello there", message_id="m1")  # redelivered: one answer
        [answer] = await channel.wait_for(1)
        await asyncio.wait_for(gateway.wait_idle(), 10)
        assert answer.text
        assert await gateway.store.journal.open_count() == 0
        _, history = await gateway.store.history.load(answer.chat.session_key, limit=None)
    assert [m.role for m in history][:1] == ["user"] and history[-1].role == "assistant"


# -- a batch's plumbing sent with its statements (gateway/store/engine/pg_transaction.py) --------


async def batched(store: Store, *jobs: Any) -> list[Any]:
    """Run ``jobs`` in one batch: the writer is held until all of them wait in its queue."""
    hold = threading.Event()
    holding = asyncio.ensure_future(store.db.run(lambda conn: hold.wait(10)))
    await asyncio.sleep(0)  # the hold job is queued first
    runs = [asyncio.ensure_future(store.db.run(job)) for job in jobs]
    hold.set()
    await holding
    return await asyncio.gather(*runs, return_exceptions=True)


async def test_a_failed_jobs_writes_and_notifications_are_undone_and_only_its(
    tmp_path: Path, pg_url: str
) -> None:
    def job(name: str, *, fails: bool = False, reads_first: bool = False) -> Any:
        def run(conn: Connection) -> str:
            if reads_first:  # a read before the first write: sent without a transaction
                conn.execute("SELECT COUNT(*) FROM sessions").fetchone()
            conn.execute("INSERT INTO sessions (session_key, last_active) VALUES (?, 1)", (name,))
            conn.notify("switchboard_test", name)
            if fails:
                raise RuntimeError(f"{name} fails after writing")
            return name

        return run

    listener = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    try:
        await listener.execute("LISTEN switchboard_test")
        async with Store(tmp_path / "unused", url=pg_url) as store:
            results = await batched(
                store,
                job("a"),
                job("b", fails=True),
                job("c", reads_first=True),
                job("d", fails=True, reads_first=True),
                job("e"),
            )
            assert results[0::2] == ["a", "c", "e"]
            assert all(isinstance(r, RuntimeError) for r in results[1::2])

            def keys(conn: Connection) -> list[str]:
                rows = conn.execute("SELECT session_key FROM sessions ORDER BY 1").fetchall()
                return [key for (key,) in rows]

            assert await store.db.run(keys) == ["a", "c", "e"]
        heard = []
        async with asyncio.timeout(5):
            async for notice in listener.notifies():
                heard.append(notice.payload)
                if len(heard) == 3:
                    break
        assert sorted(heard) == ["a", "c", "e"]
    finally:
        await listener.close()


async def test_a_stale_claim_is_refused_for_reads_and_writes_alike_in_a_batch(
    tmp_path: Path, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with Store(tmp_path / "unused", url=pg_url) as store:
        first = await store.journal.session_work("telegram:1", (), claim_by="a")
        await store.journal.session_work("telegram:1", (), claim_by="b")

        def read(conn: Connection) -> int:
            return int(conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])

        def write(conn: Connection) -> None:
            conn.execute("INSERT INTO sessions (session_key, last_active) VALUES ('x', 1)")

        token = FENCE.set(Fence("telegram:1", first.epoch))
        try:  # a's jobs, after b claimed the session: together, and a write alone
            stale = await batched(store, read, write)
            with pytest.raises(StaleClaim):
                await store.db.run(write)
        finally:
            FENCE.reset(token)
        assert all(isinstance(result, StaleClaim) for result in stale)
        assert await store.db.run(read) == 0  # the refused writes were not kept
        # the job's own error, not a failed transaction of the store's
        assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_statements_in_everyday_use_are_prepared_and_the_rest_still_run(
    tmp_path: Path, pg_url: str
) -> None:
    async with Store(tmp_path / "unused", url=pg_url) as store:

        def write(key: str) -> Any:
            def run(conn: Connection) -> None:
                conn.execute(
                    "INSERT INTO sessions (session_key, last_active) VALUES (?, 1)", (key,)
                )

            return run

        def matching(conn: Connection) -> list[str]:  # a literal % and a ? inside quotes
            rows = conn.execute(
                "SELECT session_key FROM sessions WHERE session_key LIKE ? AND '?%' <> ?"
                " ORDER BY 1",
                ("a%", "x"),
            ).fetchall()
            return [key for (key,) in rows]

        def untyped(conn: Connection) -> int:  # PostgreSQL cannot prepare this one
            row = conn.execute(
                "SELECT COUNT(*) FROM sessions WHERE ? IS NULL OR session_key = ?", (None, "")
            ).fetchone()
            return int(row[0])

        def prepared(conn: Connection) -> list[str]:
            rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
            return [statement for (statement,) in rows]

        written: list[str] = []
        for key in ("a1", "a2", "b1", "a3"):
            await store.db.run(write(key))
            written.append(key)
            assert await store.db.run(matching) == sorted(k for k in written if k < "b")
            assert await store.db.run(untyped) >= 1
        statements = await store.db.run(prepared)
        assert any("INSERT INTO sessions" in s and "$1" in s for s in statements)
        assert any("LIKE $1" in s and "'?%' <> $2" in s for s in statements)
        assert not any("IS NULL" in s for s in statements)


async def test_an_executemany_writes_every_row_and_counts_the_rows_it_changed(
    tmp_path: Path, pg_url: str
) -> None:
    async with Store(tmp_path / "unused", url=pg_url) as store:

        def write(conn: Connection) -> int:
            conn.executemany(
                "INSERT INTO sessions (session_key, last_active) VALUES (?, ?)",
                [("a", 1), ("b\x00", 2), ("c", 3)],  # NUL: PostgreSQL text cannot hold it
            )
            changed = conn.executemany(
                "UPDATE sessions SET last_active = ? WHERE session_key = ?",
                [(5, "a"), (6, "b\ufffd"), (7, "nobody")],
            )
            return changed.rowcount

        def rows(conn: Connection) -> list[tuple[str, float]]:
            return conn.execute(
                "SELECT session_key, last_active FROM sessions ORDER BY 1"
            ).fetchall()

        assert await store.db.run(write) == 2
        assert await store.db.run(rows) == [("a", 5), ("b\ufffd", 6), ("c", 3)]


@pytest.mark.parametrize("with_a_broken_read", [False, True])
async def test_reads_waiting_together_each_get_their_own_answer(
    tmp_path: Path, pg_url: str, with_a_broken_read: bool
) -> None:
    """Declared reads waiting for the writer together go to the server in one query (or, when
    one of them fails, each on its own): either way each gets its own rows, its own refused
    claim, its own error."""
    async with Store(tmp_path / "unused", url=pg_url) as store:
        await store.people.set_zone("p1", "Europe/Paris")
        await store.people.set_zone("p2", "Asia/Tokyo")
        stale = await store.journal.session_work("telegram:1", (), claim_by="a")
        await store.journal.session_work("telegram:1", (), claim_by="b")

        hold = threading.Event()
        holding = asyncio.ensure_future(store.db.run(lambda conn: hold.wait(10)))
        await asyncio.sleep(0)  # the writer is held: what follows waits in its queue together
        reads = [asyncio.ensure_future(store.people.zone(p)) for p in ("p1", "p2", "nobody")]
        token = FENCE.set(Fence("telegram:1", stale.epoch))
        refused = asyncio.ensure_future(store.people.zone("p1"))  # a's turn, after b claimed
        FENCE.reset(token)
        broken = asyncio.ensure_future(
            store.db.select([("SELECT no_such_column FROM people", ())], lambda c: c[0].fetchall())
            if with_a_broken_read
            else store.people.zone("p2")
        )
        await asyncio.sleep(0)
        hold.set()
        await holding

        assert await asyncio.gather(*reads) == ["Europe/Paris", "Asia/Tokyo", None]
        with pytest.raises(StaleClaim):
            await refused
        if with_a_broken_read:
            with pytest.raises(StoreError, match="no_such_column"):
                await broken
        else:
            assert await broken == "Asia/Tokyo"
