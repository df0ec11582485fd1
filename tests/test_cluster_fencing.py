"""Fencing: a node whose membership connection the server ends while the node lives cannot
go on writing for the sessions it held. Another node claims such a session (a new epoch)
and resumes its turn; the first node's turn, still running, is refused by the database at
its next write, so a side-effecting tool runs once. Two gateways in this process on one
PostgreSQL database (the test needs to hold one node's model call while the other takes
over), the fake model, a test tool that counts its runs."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import psycopg
import pytest

from agent.tools.base import Effect, Tool, ToolContext, ToolResult, schema
from channels.memory import MemoryChannel
from channels.webchat import create
from gateway.config.settings import Settings
from gateway.core.errors import StaleClaim
from gateway.core.messages import ChatRef
from gateway.runtime.app import Gateway
from gateway.runtime.cluster.node import ClusterGuard
from gateway.store import Store, TaskRecord
from gateway.store.cluster.fencing import FENCE, Fence
from gateway.store.cluster.membership import Membership
from gateway.store.engine.schema_pg import MIGRATION_LOCK
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.test_web_server import sign_in

pytestmark = pytest.mark.slow


class Effect1(Tool):
    """A side effect the test can count (an email sent, a payment made)."""

    name: ClassVar[str] = "charge_card"
    description: ClassVar[str] = "charge the card once"
    parameters: ClassVar[dict[str, Any]] = schema({})
    effect: ClassVar[Effect] = Effect.WRITE

    def __init__(self) -> None:
        self.runs: list[str] = []  # the turn of each run

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.runs.append(ctx.turn_id)
        return ToolResult("charged")


async def until(gateway: Gateway, predicate: Any, timeout: float) -> None:
    async def done() -> bool:
        return bool(predicate())

    async with asyncio.timeout(timeout):
        await gateway.bus.wait_until(done)


async def cut_off(admin: psycopg.AsyncConnection[Any], name: str) -> None:
    """End node ``name``'s membership connection from the server while the node lives on.
    It reconnects at once (and would take its locks back): the lock its reconnection
    registers under, taken here until ``admin`` closes, keeps it away meanwhile."""
    await admin.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK])
    cursor = await admin.execute(
        "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = %s AND datname = current_database()) t",
        [f"switchboard node {name}"],
    )
    assert await cursor.fetchone() == (1,)  # the node itself lives on


async def test_a_node_cut_off_by_the_server_cannot_run_the_tool_a_second_time(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    def node(name: str) -> Settings:
        return make_settings(home=tmp_path / name, storage={"url": pg_url}, node={"name": name})

    tool = Effect1()
    gate = asyncio.Event()
    # a's model call is held while b takes over; b's run calls the tool and answers
    fake_llm.queue(
        replace(calls(("charge_card", {})), gate=gate),
        calls(("charge_card", {})),
        text("charged once"),
    )
    channel_a, channel_b = MemoryChannel(), MemoryChannel()
    async with Gateway(node("a"), channels=[channel_a], extra_tools=[tool]) as a:
        await channel_a.push("charge my card")
        await fake_llm.wait_for_requests(1)  # a runs the turn: its model call is held
        b = Gateway(node("b"), channels=[channel_b], extra_tools=[tool])
        joining = asyncio.create_task(b.start())  # runs turns; leads once a is gone
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            admin = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
            try:
                await cut_off(admin, "a")
                await asyncio.wait_for(joining, 15)  # b leads: a's lock went with it
                # b took the session (its turn left running), resumed it, ran the tool
                [answer] = await channel_b.wait_for(1, max_wait=20)
                assert answer.text == "charged once"
                gate.set()  # a's model call returns the call it would make: refused
                await until(a, lambda: not a.load.sessions, 15)  # a let the session go
                await b.wait_idle()
            finally:
                await admin.close()  # a reconnects, finds b leading, and must stop
            assert isinstance(a.guard, ClusterGuard)
            await asyncio.wait_for(a.guard.fenced.wait(), 15)
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()
    assert len(tool.runs) == 1  # one charge, by b's resumed turn
    assert channel_a.sent == []  # a sent nothing: it no longer leads
    assert len(fake_llm.requests) == 3  # a's held call; b's call and its answer; no more
    with psycopg.connect(pg_url) as conn:
        (epoch,) = conn.execute("SELECT MAX(epoch) FROM session_claims").fetchone()
        (ledger,) = conn.execute("SELECT COUNT(*) FROM tool_ledger").fetchone()
    assert epoch == 2 and ledger == 1  # claimed by a, then by b; one side effect recorded


async def test_a_write_under_a_stale_claim_is_refused_by_the_database(
    tmp_path: Path, pg_url: str
) -> None:
    async with Store(tmp_path / "unused", url=pg_url) as store:
        first = await store.journal.session_work("telegram:1", (), claim_by="a")
        second = await store.journal.session_work("telegram:1", (), claim_by="b")
        assert (first.epoch, second.epoch) == (1, 2)
        token = FENCE.set(Fence("telegram:1", first.epoch))
        try:
            with pytest.raises(StaleClaim):
                await store.ledger.start("turn-1:call-1", "charge_card")
        finally:
            FENCE.reset(token)
        token = FENCE.set(Fence("telegram:1", second.epoch))
        try:
            assert await store.ledger.start("turn-1:call-1", "charge_card")
        finally:
            FENCE.reset(token)


# -- seeing it: the nodes on /metrics and the status page; tasks owned by their node ------


async def test_metrics_and_status_show_every_node_its_role_sessions_and_connections(
    tmp_path: Path, make_settings: SettingsFactory, pg_url: str
) -> None:
    def node(name: str, **extra: Any) -> Settings:
        return make_settings(
            home=tmp_path / name, storage={"url": pg_url}, node={"name": name}, **extra
        )

    leader = node("a", web={"port": 0})
    async with Gateway(leader, channels=[create(leader)]) as a:
        assert a.web is not None
        b = Gateway(node("b"), channels=[MemoryChannel()])
        joining = asyncio.create_task(b.start())  # a standby: runs turns, serves nothing
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                await sign_in(http, a.web.sign_in_link())  # the owner's browser

                async def listed() -> dict[str, Any]:
                    async with http.get(a.web.url + "api/status") as response:  # type: ignore[union-attr]
                        return {n["name"]: n for n in (await response.json())["nodes"]}

                nodes: dict[str, Any] = {}

                async def reported() -> bool:  # each node's three connections are open
                    nodes.update(await listed())
                    return nodes.keys() == {"a", "b"} and all(
                        n["connections"] == 3 for n in nodes.values()
                    )

                async with asyncio.timeout(15):  # the nodes report with their heartbeat
                    await a.bus.wait_until(reported)
                async with http.get(a.web.url + "metrics") as response:
                    lines = (await response.text()).splitlines()
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()
    assert nodes["a"]["role"] == "leader" and nodes["b"]["role"] == "standby"
    assert 'switchboard_node_leading{node="a"} 1.0' in lines
    assert 'switchboard_node_leading{node="b"} 0.0' in lines
    assert 'switchboard_node_connections{node="a"} 3.0' in lines
    assert 'switchboard_node_connections{node="b"} 3.0' in lines
    assert any(line.startswith('switchboard_node_sessions{node="b"}') for line in lines)


async def test_a_starting_node_reports_interrupted_only_tasks_of_nodes_that_are_gone(
    tmp_path: Path, pg_url: str
) -> None:
    chat = ChatRef("telegram", "1")
    owner = {"channel": "telegram", "sender_id": "1", "role": "owner"}
    alive = Membership(pg_url, "alive", host="test", pid=1)
    await alive.start()  # a node that runs its task right now
    try:
        for node, task_id in (("alive", "t-alive"), ("gone", "t-gone"), ("me", "t-mine")):
            async with Store(tmp_path / "unused", url=pg_url, node=node) as store:
                await store.tasks.start(
                    TaskRecord(task_id, "work", "general", chat, owner, "queued")
                )
        async with Store(tmp_path / "unused", url=pg_url, node="me") as store:
            reported = {record.id for record in await store.tasks.interrupted()}
            still = {record.id for record in await store.tasks.running()}
    finally:
        await alive.stop()
    assert reported == {"t-gone", "t-mine"}  # the live node's task is left to it
    assert "t-alive" in still


async def test_running_nodes_report_a_gone_nodes_task_once_and_keep_their_own(
    tmp_path: Path, pg_url: str
) -> None:
    chat = ChatRef("telegram", "1")
    owner = {"channel": "telegram", "sender_id": "1", "role": "owner"}
    for node, task_id in (("gone", "t-gone"), ("me", "t-mine")):
        async with Store(tmp_path / "unused", url=pg_url, node=node) as store:
            await store.tasks.start(TaskRecord(task_id, "work", "general", chat, owner, "queued"))
    alive = Membership(pg_url, "me", host="test", pid=1)
    await alive.start()  # "me" runs its task; "gone" was killed
    try:
        async with (
            Store(tmp_path / "unused", url=pg_url, node="me") as me,
            Store(tmp_path / "unused", url=pg_url, node="other") as other,
        ):
            sweeps = await asyncio.gather(
                me.tasks.interrupted(gone_only=True), other.tasks.interrupted(gone_only=True)
            )
            mine = await me.tasks.get("t-mine")
    finally:
        await alive.stop()
    # the gone node's task is reported by one of the two sweeps, and only once
    assert sorted(record.id for sweep in sweeps for record in sweep) == ["t-gone"]
    assert mine is not None and mine.state == "queued"  # a node's own task runs here
