"""Soak of a cluster: ``python -m bench.soak --cluster 3`` runs the soak's traffic through N
``switchboard run`` node processes on a PostgreSQL server of its own, with cluster faults.

The fake Telegram Bot API and the fake LLM run in this process; the nodes reach them by
URL. Answers stream by edits (a draft posted, then edited into the answer, as the model
writes it in four pieces over 0.45 s), so drafts and edits happen on every node. Every
``--fault-every`` seconds one fault, in turn:

* ``node-kill``: SIGKILL a node that does not lead, start it again;
* ``leader-kill``: SIGKILL the leader (the ``cluster_nodes`` row marked leader), wait for
  another node to take over, start the killed one again;
* ``db-restart``: stop the PostgreSQL server, 5 s, start it again (the nodes ride it out);
* ``bot-api-5xx``: the fake Bot API answers every call with 502 for 15 s;
* ``flood-429``: one chat's next send gets 429 with ``retry_after`` 20;
* ``redelivery``: the Bot API delivers an already confirmed update (one already answered)
  again, with its own ``update_id``: it must not be answered a second time.

A node that exits by itself is counted and started again after a second, as a supervisor
would. Every ``--sample-every`` seconds: messages, replies, each node's RSS and open file
descriptors (from /proc), the database's size (``pg_database_size``) and the WAL written
since the previous sample (``pg_current_wal_lsn``), and the faults begun since then. A reply is counted by what the chat
finally shows (the fake applies edits and deletions): a draft left beside its answer, or
two answers, count as answered twice.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.procs import cpu_seconds, memory_mib
from bench.soak import CLUSTER_FAULTS
from bench.soak_chats import Conversations, latency, schedule
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram, random_token
from tests.nodes import STREAMING, Node, node_env, start_node, written_echo
from tests.pg_server import OwnServer, own_server
from tests.test_cli import switchboard

FAULTS = CLUSTER_FAULTS


@dataclass
class Slot:
    """One node name: its environment and the process running under it now."""

    name: str
    env: dict[str, str]
    node: Node
    planned: bool = False  # a fault is restarting it: not an exit of its own


@dataclass
class Sample:
    at: float
    sent: int
    replies: int
    rss: list[float | None]
    cpu: list[float | None]  # percent of one core since the previous sample, per node
    fds: list[int | None]
    db_kib: float | None
    wal_kib: float | None  # written since the previous sample
    leader: str
    faults: str  # those begun since the previous sample


class ClusterSoak:
    def __init__(self, args: argparse.Namespace, home: Path, server: OwnServer) -> None:
        self.args = args
        self.home = home
        self.server = server
        self.faults_list: list[str] = args.faults or list(FAULTS)
        self.slots: list[Slot] = []
        self.samples: list[Sample] = []
        self.exits: list[tuple[float, str, int | None]] = []  # exits no fault asked for
        self.faults_done: list[tuple[float, str, str]] = []
        self.faults_begun: list[str] = []  # in the order they began; a row shows the new ones
        self.faults_shown = 0
        self.stop_traffic = asyncio.Event()
        self.started = time.monotonic()
        self.wal_mark: str | None = None
        self.redelivered = 0
        self.cpu_marks: dict[int, tuple[float, float]] = {}  # pid -> (when, CPU seconds)
        self.tg: FakeTelegram
        self.llm: FakeLLM
        self.users: Conversations

    def now(self) -> float:
        return time.monotonic() - self.started

    # -- nodes ----------------------------------------------------------------------------

    async def start_slot(self, name: str) -> Slot:
        env = node_env(
            self.home,
            self.llm,
            self.tg,
            self.server.url,
            name,
            SWITCHBOARD_HEARTBEAT__ENABLED="false",
            SWITCHBOARD_LIMITS__USER_TURNS_PER_HOUR="0",
            SWITCHBOARD_LIMITS__USER_DAILY_TOKENS="0",
            SWITCHBOARD_LLM__TIMEOUT_SECONDS="10",
            **STREAMING,
        )
        code, _, err = await switchboard("onboard", env=env)
        if code != 0:
            raise RuntimeError(f"onboard of {name} failed: {err}")
        slot = Slot(name, env, await start_node(name, env, self.log(name)))
        await self.settled(slot.node)
        return slot

    def log(self, name: str) -> Path:
        return self.home / f"{name}.log"

    async def settled(self, node: Node) -> None:
        """Until the node leads or stands by (or exits; at most a minute)."""
        waits = [
            asyncio.ensure_future(node.ready.wait()),
            asyncio.ensure_future(node.standby.wait()),
            asyncio.ensure_future(node.process.wait()),
        ]
        await asyncio.wait(waits, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()

    async def restart(self, slot: Slot) -> None:
        """SIGKILL the slot's node (no goodbye) and start it again under the same name."""
        slot.planned = True
        with contextlib.suppress(ProcessLookupError):
            slot.node.process.send_signal(signal.SIGKILL)
        await slot.node.process.wait()
        slot.node = await start_node(slot.name, slot.env, self.log(slot.name))
        slot.planned = False
        await self.settled(slot.node)

    async def supervise(self) -> None:
        """Start again a node that exited by itself (counted), as a supervisor would."""
        while True:
            await asyncio.sleep(1)
            for slot in self.slots:
                code = slot.node.process.returncode
                if code is not None and not slot.planned:
                    self.exits.append((self.now(), slot.name, code))
                    slot.node = await start_node(slot.name, slot.env, self.log(slot.name))

    async def query(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        """One row from the soak's own server on a connection of its own (``None`` while
        the server is unreachable: a restart under way)."""
        with contextlib.suppress(psycopg.Error, OSError):
            async with await psycopg.AsyncConnection.connect(
                self.server.url, autocommit=True, connect_timeout=3
            ) as conn:
                cursor = await conn.execute(sql, params)
                return await cursor.fetchone()
        return None

    async def leader(self) -> str | None:
        """The node the membership table says leads (``None`` while unreachable)."""
        row = await self.query(
            "SELECT name FROM cluster_nodes WHERE role = 'leader' ORDER BY heartbeat_at DESC LIMIT 1"
        )
        return None if row is None else str(row[0])

    # -- faults ---------------------------------------------------------------------------

    async def faults(self) -> None:
        every, stop = self.args.fault_every, self.stop_traffic
        async for kind in schedule(self.faults_list, every, self.started, stop):
            self.faults_begun.append(kind)
            at = self.now()
            detail = await self.inject(kind)
            self.faults_done.append((at, kind, f"{detail} ({self.now() - at:.0f} s)"))

    async def inject(self, kind: str) -> str:
        """Inject one fault; returns what it did, for the report."""
        if kind in ("node-kill", "leader-kill"):
            leader = await self.leader()
            if kind == "leader-kill":
                victims = [s for s in self.slots if s.name == leader]
            else:
                victims = [s for s in self.slots if s.name != leader]
            if not victims:
                return f"skipped (leader {leader})"
            slot = random.choice(victims)
            await self.restart(slot)
            if kind == "leader-kill":  # another took over, or the restarted one leads again
                took = [s.name for s in self.slots if s.node.ready.is_set()]
                return f"{slot.name} killed; leading: {', '.join(took) or '?'}"
            return f"{slot.name} killed and back"
        if kind == "db-restart":
            await asyncio.to_thread(self.server.stop)
            await asyncio.sleep(5)
            await asyncio.to_thread(self.server.start)
            return "server stopped 5 s"
        if kind == "bot-api-5xx":
            await self.users.outage()
            return "502 for 15 s"
        if kind == "flood-429":
            return f"chat {self.users.flood()}"
        if kind == "redelivery":
            answered = self.users.answered_updates
            if not answered:
                return "skipped (nothing answered yet)"
            chat = random.choice(list(answered))
            await self.tg.redeliver(answered[chat])
            self.redelivered += 1
            return f"chat {chat} update {answered[chat]['update_id']}"
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")

    # -- sampling -------------------------------------------------------------------------

    async def database(self) -> tuple[float | None, float | None]:
        """The database's size (KiB) and the WAL written since the last call (KiB)."""
        row = await self.query(
            "SELECT pg_database_size(current_database()), pg_current_wal_lsn()::text,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)",
            [self.wal_mark],
        )
        if row is None:
            return None, None
        size, self.wal_mark, written = row
        return int(size) / 1024, None if written is None else float(written) / 1024

    async def sample(self) -> Sample:
        rss: list[float | None] = []
        cpu: list[float | None] = []
        fds: list[int | None] = []
        for slot in self.slots:
            pid = slot.node.process.pid
            try:
                size = memory_mib(pid)  # 0 once it exited (a zombie has no memory)
                rss.append(size or None)
                fds.append(len(os.listdir(f"/proc/{pid}/fd")) if size else None)
                cpu.append(self.cpu_percent(pid) if size else None)
            except OSError:  # between a kill and the restart
                rss.append(None)
                cpu.append(None)
                fds.append(None)
        db_kib, wal_kib = await self.database()
        begun, self.faults_shown = self.faults_begun[self.faults_shown :], len(self.faults_begun)
        return Sample(
            at=self.now(),
            sent=self.users.total_sent(),
            replies=self.users.total_answered(),
            rss=rss,
            cpu=cpu,
            fds=fds,
            db_kib=db_kib,
            wal_kib=wal_kib,
            leader=await self.leader() or "?",
            faults=", ".join(begun) or "-",
        )

    def cpu_percent(self, pid: int) -> float:
        """The node's CPU use since its previous sample (since it started, the first time)."""
        now, used = time.monotonic(), cpu_seconds(pid)
        then, before = self.cpu_marks.get(pid, (now, 0.0))
        self.cpu_marks[pid] = (now, used)
        return 100 * (used - before) / (now - then) if now > then else 0.0

    async def sampler(self) -> None:
        while True:
            self.samples.append(await self.sample())
            await asyncio.sleep(self.args.sample_every)

    # -- the run --------------------------------------------------------------------------

    async def run(self) -> int:
        self.llm = await FakeLLM(responder=written_echo, latency=0.2).start()
        self.tg = await FakeTelegram(random_token()).start()
        self.users = Conversations(self.tg, self.llm, self.stop_traffic)
        background: list[asyncio.Task[None]] = []
        try:
            for i in range(self.args.cluster):
                self.slots.append(await self.start_slot(f"node-{i}"))
            await self.database()  # the WAL mark
            self.started = time.monotonic()
            background = [
                asyncio.create_task(self.sampler()),
                asyncio.create_task(self.supervise()),
            ]
            args = self.args
            await self.users.converse(args.chats, args.minutes, self.faults(), grace=10)
            self.samples.append(await self.sample())
        finally:
            for task in background:
                task.cancel()
            await self.stop_nodes()
            await self.tg.stop()
            await self.llm.stop()
        return self.report()

    async def stop_nodes(self) -> None:
        for slot in self.slots:
            slot.planned = True
            if slot.node.process.returncode is None:
                slot.node.process.send_signal(signal.SIGTERM)
        for slot in self.slots:
            try:
                await asyncio.wait_for(slot.node.process.wait(), 30)
            except TimeoutError:
                slot.node.process.kill()
                await slot.node.process.wait()

    def report(self) -> int:
        verdicts = self.users.verdicts()
        shown = self.users.shown
        lost = sum(v.lost for v in verdicts.values())
        doubled = sum(v.doubled for v in verdicts.values())
        unfinished = sum(v.unfinished for v in verdicts.values())
        notices = [n for v in verdicts.values() for n in v.notices]
        sent = self.users.total_sent()
        names = [slot.name for slot in self.slots]
        print(
            f"Soak, cluster: {self.args.minutes} min, {len(self.slots)} nodes on PostgreSQL,"
            f" {self.args.chats} chats, streaming by edits, a fault every"
            f" {self.args.fault_every} s (fake Bot API and fake LLM in the soak's process)"
        )
        for at, kind, detail in self.faults_done:
            print(f"  {at:5.0f} s  {kind}: {detail}")
        print(
            "  nodes that exited by themselves: "
            + (", ".join(f"{n} at {at:.0f} s (code {c})" for at, n, c in self.exits) or "none")
        )
        print()
        print(
            "| t (s) | messages | replies | RSS (MiB) "
            + " / ".join(names)
            + " | CPU (%) "
            + " / ".join(names)
            + " | open fds "
            + " / ".join(names)
            + " | database (KiB) | WAL since last row (KiB) | leader | faults since last row |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        for s in self.samples:
            rss = " / ".join("-" if r is None else f"{r:.0f}" for r in s.rss)
            cpu = " / ".join("-" if c is None else f"{c:.0f}" for c in s.cpu)
            fds = " / ".join("-" if f is None else str(f) for f in s.fds)
            db = "-" if s.db_kib is None else f"{s.db_kib:.0f}"
            wal = "-" if s.wal_kib is None else f"{s.wal_kib:.0f}"
            print(
                f"| {s.at:.0f} | {s.sent} | {s.replies} | {rss} | {cpu} | {fds} | {db} | {wal} "
                f"| {s.leader} | {s.faults} |"
            )
        print()
        print(
            f"  messages {sent}, answered {sum(v.answered for v in verdicts.values())},"
            f" lost {lost} (of which only a draft shows: {unfinished}), answered twice"
            f" {doubled}; notices {len(notices)}; answers streamed by edits"
            f" {shown.edits} edits; redeliveries {self.redelivered}"
        )
        print(f"  wait for an answer: {latency(self.users.waits)}")
        for notice in notices[:5]:
            print(f"    notice: {notice[:120]!r}")
        for chat, verdict in verdicts.items():
            if verdict.lost or verdict.doubled:
                print(f"    chat {chat}: {verdict}; shows {len(shown.visible(chat))}")
        ok = lost == 0 and doubled == 0
        print("  every message answered exactly once" if ok else "  FAILED: see lost/doubled")
        chats = {
            chat: {"sent": t, "shown": shown.visible(chat)} for chat, t in self.users.sent.items()
        }
        (self.home / "chats.json").write_text(json.dumps(chats, indent=1))  # to look into
        return 0 if ok else 1


async def run_cluster(args: argparse.Namespace, home: Path) -> int:
    """The cluster soak on a PostgreSQL server of its own (removed afterwards)."""
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    # a node killed while the fake model writes to it hangs up: expected, not worth a trace
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    with own_server() as server:
        print(f"PostgreSQL of its own on port {server.port}; node logs in {home}", flush=True)
        return await ClusterSoak(args, home, server).run()
