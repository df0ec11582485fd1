"""Benchmark: a burst of chats through 1, 2 and 3 nodes on PostgreSQL, and 1 on SQLite.

Run from the repository root: ``python -m bench.cluster [--chats 150] [--reps 1]
[--one-node] [--server URL]``.

Each configuration runs ``switchboard run`` processes (the nodes) against the fake Telegram
Bot API (in this process) and the fake LLM (its own process, 0.2 s per answer). N chats
write at the same instant; the result is the wall time until every answer arrived, turns
per second, and CPU per turn: the node processes' user + system time, and (PostgreSQL) that
of the database server's backends serving them, from /proc; with several nodes, how many
turns each ran (every node runs turns; the leader also receives and sends). Each PostgreSQL run gets a
fresh database on ``--server`` (default: the local server, user postgres). Answers do not
stream by edits (``telegram.streaming = false``) in any configuration.

``--reps N`` runs SQLite and one PostgreSQL node N times, back to back, and prints the ratio
of their CPU per turn (PostgreSQL's nodes + database over SQLite's) for each and the median:
one burst is a small sample, and a machine's load moves it by a third between runs.
``--one-node`` leaves out the 2- and 3-node configurations.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from bench.common import llm_process, quiet_proxies
from bench.procs import cpu_seconds
from tests.fakes.telegram import FakeTelegram, random_token
from tests.nodes import spawn

SERVER = "postgresql://postgres@localhost:5432/postgres"


@dataclass(frozen=True, slots=True)
class Result:
    label: str
    chats: int
    seconds: float
    node_cpu: float
    db_cpu: float
    transactions: int  # committed on the database during the burst (PostgreSQL)
    spread: str = ""  # turns run per node (PostgreSQL), e.g. "52/49/50"

    @property
    def cpu_per_turn(self) -> float:
        """Nodes + database, in milliseconds."""
        return (self.node_cpu + self.db_cpu) / self.chats * 1000

    def line(self) -> str:
        per_turn = self.cpu_per_turn
        return (
            f"{self.label:<22} {self.chats} chats in {self.seconds:5.2f} s"
            f" = {self.chats / self.seconds:6.1f} turns/s; CPU per turn {per_turn:5.1f} ms"
            f" (nodes {self.node_cpu / self.chats * 1000:.1f}, database"
            f" {self.db_cpu / self.chats * 1000:.1f})"
            + (
                f"; {self.transactions / self.chats:.1f} transactions per turn"
                if self.transactions
                else ""
            )
            + (f"; turns per node {self.spread}" if self.spread else "")
        )


def node_env(
    home: Path, llm_url: str, tg: FakeTelegram, url: str | None, name: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    env.update(
        SWITCHBOARD_HOME=str(home),
        SWITCHBOARD_LLM__BASE_URL=llm_url,
        SWITCHBOARD_LLM__API_KEY="sk-bench-123456",
        SWITCHBOARD_LLM__MAX_RETRIES="0",
        SWITCHBOARD_LLM__MODEL="fake-model",
        SWITCHBOARD_NODE__NAME=name,
        SWITCHBOARD_WEB__ENABLED="false",
        SWITCHBOARD_HEARTBEAT__ENABLED="false",
        SWITCHBOARD_AGENT__REFLECTION="false",
        SWITCHBOARD_TELEGRAM__TOKEN=tg.token,
        SWITCHBOARD_TELEGRAM__BASE_URL=tg.base_url,
        SWITCHBOARD_TELEGRAM__ALLOW_FROM='["*"]',
        SWITCHBOARD_TELEGRAM__POLL_TIMEOUT_SECONDS="30",
        # turns, not streaming (bench.streaming): in a cluster only the leader's turns
        # stream, so with it on the configurations would not do the same work
        SWITCHBOARD_TELEGRAM__STREAMING="false",
        NO_PROXY="127.0.0.1,localhost",
    )
    if url is not None:
        env["SWITCHBOARD_STORAGE__URL"] = url
    return env


@contextlib.asynccontextmanager
async def database(server: str) -> AsyncIterator[str]:
    name = f"switchboard_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def commits(url: str | None) -> int:
    """Transactions committed in the database so far (0 on SQLite)."""
    if url is None:
        return 0
    with psycopg.connect(url) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return 0 if row is None else int(row[0])


def spread(url: str | None) -> str:
    """Turns run per node since it started, as the nodes report them (PostgreSQL)."""
    if url is None:
        return ""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT turns FROM cluster_nodes ORDER BY name").fetchall()
    return "/".join(str(turns) for (turns,) in rows)


def backend_cpu(url: str | None) -> float:
    """CPU seconds of the database server processes serving the nodes (0 on SQLite)."""
    if url is None:
        return 0.0
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE 'switchboard%'"
        ).fetchall()
    total = 0.0
    for (pid,) in rows:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


async def start_node(env: dict[str, str]) -> asyncio.subprocess.Process:
    process = await spawn(env, asyncio.subprocess.DEVNULL)
    assert process.stdout is not None
    async with asyncio.timeout(60):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line or line.endswith("ready\n") or line.startswith("switchboard: standby"):
                return process


async def run(label: str, nodes: int, url: str | None, llm_url: str, chats: int) -> Result:
    tg = await FakeTelegram(random_token()).start()
    processes: list[asyncio.subprocess.Process] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(nodes):
                env = node_env(Path(tmp) / f"n{i}", llm_url, tg, url, f"bench-{i}")
                onboard = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "gateway", "onboard", env=env,
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                )  # fmt: skip
                await onboard.wait()
                processes.append(await start_node(env))
            # warm up: the first turn imports the model SDK
            await tg.say("warm up", chat_id=1, user_id=1)
            await tg.wait_for(lambda: len(tg.texts(1)) >= 1, timeout=60)
            cpu_before = sum(cpu_seconds(p.pid) for p in processes)
            db_before = backend_cpu(url)
            commits_before = commits(url)
            started = time.perf_counter()
            for chat in range(2, chats + 2):
                await tg.say(f"hello from {chat}", chat_id=chat, user_id=chat)
            await tg.wait_for(lambda: all(tg.texts(c) for c in range(2, chats + 2)), timeout=300)
            seconds = time.perf_counter() - started
            node_cpu = sum(cpu_seconds(p.pid) for p in processes) - cpu_before
            db_cpu = backend_cpu(url) - db_before
            await asyncio.sleep(1.5)  # backends report their statistics within a second
            transactions = commits(url) - commits_before
            per_node = spread(url)  # reported with the heartbeat, within the 1.5 s above
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                await process.wait()
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
        await tg.stop()
    return Result(label, chats, seconds, node_cpu, db_cpu, transactions, per_node)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chats", type=int, default=150)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--one-node", action="store_true")
    parser.add_argument("--server", default=SERVER)
    args = parser.parse_args()
    quiet_proxies()
    ratios: list[float] = []
    async with llm_process() as llm_url:
        for _ in range(args.reps):
            sqlite = await run("SQLite, 1 node", 1, None, llm_url, args.chats)
            print(sqlite.line(), flush=True)
            async with database(args.server) as url:
                postgres = await run("PostgreSQL, 1 node", 1, url, llm_url, args.chats)
            print(postgres.line(), flush=True)
            ratios.append(postgres.cpu_per_turn / sqlite.cpu_per_turn)
        if args.reps > 1:
            listed = ", ".join(f"{r:.2f}" for r in ratios)
            print(
                f"CPU per turn, one PostgreSQL node (nodes + database) / SQLite: {listed};"
                f" median {statistics.median(ratios):.2f}",
                flush=True,
            )
        for nodes in () if args.one_node else (2, 3):
            async with database(args.server) as url:
                label = f"PostgreSQL, {nodes} nodes"
                print((await run(label, nodes, url, llm_url, args.chats)).line(), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
