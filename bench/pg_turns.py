"""Benchmark: what a turn costs the database, counted on a PostgreSQL server of its own.

Run from the repository root: ``python -m bench.pg_turns [--turns 40] [--chats 10]
[--reps 1] [--detail]``.

Starts a private PostgreSQL server (``initdb`` into a temporary directory, its own port:
tests/pg_server.py), so every statement and every WAL byte counted is this gateway's and
nobody else's. One gateway node in this process (the real Telegram channel against the fake
Bot API, the fake LLM answering each message whole, streaming by edits off), ``--chats``
people each writing ``--turns / --chats`` messages, each after the answer to the one
before. After a warm-up turn, per turn:

* queries the server received, by connection (the store's, the membership connection, the
  listener), from its statement log (``log_statement = all``, first run only); with
  ``--detail`` the store's by the kind of their last statement;
* WAL bytes written (``pg_current_wal_lsn`` before and after) and transactions committed;
* CPU: this process (the node, with the fakes) plus the server's processes (postmaster and
  every backend, from /proc), in ``--reps`` runs with the statement log off (it costs the
  server CPU of its own), each after a run on a SQLite file (this process only), each run on
  a fresh database.

Statements and WAL bytes do not move with the machine's load; CPU does (ranges over runs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.common import quiet_proxies, settings_for
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, echo
from tests.fakes.telegram import FakeTelegram, fast_channel, random_token, section
from tests.pg_server import OwnServer, own_server

# a simple query ("statement"), or one execution of the extended protocol ("execute"): what
# the membership connection sends, and each row of a store job's executemany
STATEMENT_LINE = re.compile(r"^\[(?P<app>[^\]]*)\] LOG:  (?:statement|execute [^:]*): ")


@dataclass
class Cost:
    label: str
    turns: int
    seconds: float
    cpu_node: float
    cpu_server: float | None = None  # None: SQLite, no server
    statements: Counter[str] | None = None
    kinds: Counter[str] | None = None
    wal_bytes: int = 0
    transactions: int = 0

    def line(self) -> str:
        per = 1000 / self.turns
        cpu = f"{self.cpu_node * per:.1f}"
        if self.cpu_server is not None:
            cpu += f" + {self.cpu_server * per:.1f} = {(self.cpu_node + self.cpu_server) * per:.1f}"
        text = f"{self.label}: {self.turns} turns in {self.seconds:.1f} s; CPU per turn {cpu} ms"
        if self.statements is not None:
            total = sum(self.statements.values())
            parts = ", ".join(
                f"{name} {count / self.turns:.1f}"
                for name, count in sorted(self.statements.items())
            )
            text += (
                f"; statements per turn {total / self.turns:.1f} ({parts});"
                f" WAL {self.wal_bytes / self.turns:,.0f} bytes per turn;"
                f" transactions per turn {self.transactions / self.turns:.1f}"
            )
        return text


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(server: OwnServer) -> float:
    """CPU seconds of every process of the server (its postmaster's children and itself)."""
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if int(entry.name) == postmaster or parent == postmaster:
                total += cpu_seconds(int(entry.name))
        except (OSError, ValueError):
            continue
    return total


PREPARE = re.compile(r"PREPARE (?P<name>\w+) AS (?P<text>.*)")
EXECUTE = re.compile(r"EXECUTE (?P<name>\w+)\b")


def statements(log: Path, since: int) -> tuple[Counter[str], Counter[str]]:
    """Queries logged after byte ``since``: by connection kind, and the store's by the kind
    of their last statement (a query carries the job's statement last, after what rides
    along with it: gateway/store/engine/pg_transaction.py; a prepared one by its text)."""
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    prepared: dict[str, str] = {}
    with log.open("rb") as file:
        data = file.read()
    position = 0
    for line in data.decode(errors="replace").splitlines(keepends=True):
        at, position = position, position + len(line.encode(errors="replace"))
        match = STATEMENT_LINE.match(line)
        if match is None or not match["app"].startswith("switchboard"):
            continue
        text = line[match.end() :].strip()
        named = PREPARE.match(text)
        if named is not None:
            prepared[named["name"]] = named["text"]
        if at < since:
            continue
        # store, node or listener (an older store connection: "switchboard" alone)
        connection = [*match["app"].split(), "store"][1]
        counts[connection] += 1
        if named is not None:
            kinds["PREPARE"] += 1
        elif connection == "store":
            last = text.rsplit("; ", 1)[-1]
            if (executed := EXECUTE.match(last)) is not None:
                last = prepared.get(executed["name"], last)
            words = last.split()
            kinds[" ".join(words[:3] if words[0] in ("SELECT", "SET") else words[:2])] += 1
    return counts, kinds


def wal_and_commits(url: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, xact_commit"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def measure(
    label: str, turns: int, chats: int, server: OwnServer | None, *, count: bool = False
) -> Cost:
    url = fresh_database(server) if server is not None else ""
    llm = await FakeLLM().start()
    llm.responder = echo
    tg = await FakeTelegram(random_token()).start()
    people = list(range(100, 100 + chats))
    try:
        with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
            telegram = section(tg, allow_from=["*"], streaming=False)
            storage = {"url": url} if url else {}
            settings = settings_for(
                Path(tmp) / "home", llm.openai_url, telegram=telegram, storage=storage
            )
            async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
                await tg.say("warm up", chat_id=1, user_id=1)
                await tg.wait_sent(1, chat_id=1, timeout=60)
                await gateway.wait_idle()
                await asyncio.sleep(2.5)  # one look on the timer and a heartbeat pass: steady
                log_at = server.log.stat().st_size if server is not None else 0
                wal_before, commits_before = wal_and_commits(url) if url else (0, 0)
                cpu_before = time.process_time()
                db_before = server_cpu(server) if server is not None else 0.0
                started = time.perf_counter()

                async def person(chat: int) -> None:
                    for i in range(turns // chats):
                        await tg.say(f"question {i}", chat_id=chat, user_id=chat)
                        await tg.wait_sent(i + 1, chat_id=chat, timeout=60)

                await asyncio.gather(*(person(chat) for chat in people))
                await gateway.wait_idle()
                seconds = time.perf_counter() - started
                cpu_node = time.process_time() - cpu_before
                cost = Cost(label, turns // chats * chats, seconds, cpu_node)
                if server is not None:
                    cost.cpu_server = server_cpu(server) - db_before
                    await asyncio.sleep(1.0)  # the statistics collector reports within 1 s
                    wal_after, commits_after = wal_and_commits(url)
                    cost.wal_bytes = wal_after - wal_before
                    cost.transactions = commits_after - commits_before
                    if count:
                        cost.statements, cost.kinds = statements(server.log, log_at)
    finally:
        await tg.stop()
        await llm.stop()
    return cost


def fresh_database(server: OwnServer) -> str:
    """A new, empty database on ``server`` (a run's platform message ids would be taken for
    redeliveries in the database of the run before); its URL."""
    name = f"bench_{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.url.rsplit("/", 1)[0] + "/" + name


def set_logging(url: str, on: bool) -> None:
    """Log every statement (to count them) or none (to time the server without its log)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET log_statement = '{'all' if on else 'none'}'")
        conn.execute("SELECT pg_reload_conf()")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--reps", type=int, default=1, help="CPU measured this many times")
    parser.add_argument("--detail", action="store_true", help="the store's statements by kind")
    args = parser.parse_args()
    quiet_proxies()
    settings = ("log_statement=all", "log_line_prefix='[%a] '", "synchronous_commit=on")
    with own_server(*settings) as server:
        counted = await measure(
            "PostgreSQL, every statement logged", args.turns, args.chats, server, count=True
        )
        print(counted.line(), flush=True)
        if args.detail and counted.kinds is not None:
            for kind, count in counted.kinds.most_common():
                print(f"  {count / counted.turns:6.2f}  {kind}")
        set_logging(server.url, on=False)
        for _ in range(args.reps):  # alternating, so a change in the machine's load hits both
            sqlite = await measure("SQLite", args.turns, args.chats, None)
            pg = await measure("PostgreSQL, no statement log", args.turns, args.chats, server)
            assert pg.cpu_server is not None
            ratio = (pg.cpu_node + pg.cpu_server) / pg.turns / (sqlite.cpu_node / sqlite.turns)
            print(sqlite.line(), flush=True)
            print(f"{pg.line()}; ratio {ratio:.2f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
