"""Riding out the database: a node that loses PostgreSQL pauses (``/healthz`` says
degraded), reconnects with backoff and carries on without a restart. Once with a PostgreSQL
server this test starts itself (its own data directory and port) and stops and starts
again; once by ending every connection of one node of two (``pg_terminate_backend``) on the
shared test server. Gateways in this process, the fake model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from channels.memory import MemoryChannel
from channels.webchat import create
from gateway.config.settings import Settings
from gateway.core.messages import OutboundMessage
from gateway.runtime.app import Gateway
from gateway.runtime.cluster.node import ClusterGuard
from gateway.store.cluster.membership import MAX_BACKOFF, name_lock
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM
from tests.pg_server import OwnServer, binaries
from tests.pg_server import own_server as started_server

pytestmark = pytest.mark.slow


@pytest.fixture
def own_server() -> Iterator[OwnServer]:
    if binaries() is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    with started_server() as server:
        yield server


async def until(gateway: Gateway, predicate: Any, timeout: float) -> None:
    async def done() -> bool:
        return bool(predicate())

    async with asyncio.timeout(timeout):
        await gateway.bus.wait_until(done)


async def healthz(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(url + "healthz") as response:
        return response.status, await response.json()


async def test_a_node_rides_out_a_database_restart_without_restarting(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, own_server: OwnServer
) -> None:
    settings = make_settings(
        home=tmp_path / "a", storage={"url": own_server.url}, node={"name": "a"}, web={"port": 0}
    )
    channel = MemoryChannel()
    async with Gateway(settings, channels=[create(settings), channel]) as a:
        assert isinstance(a.guard, ClusterGuard) and a.web is not None
        membership = a.guard.membership
        await channel.push("before")
        await channel.wait_for(1)
        await asyncio.to_thread(own_server.stop)
        await asyncio.wait_for(membership.degraded.wait(), 15)  # paused
        assert await healthz(a.web.url) == (
            200,
            {"status": "degraded", "reason": "lost the database: paused, reconnecting"},
        )
        await asyncio.to_thread(own_server.start)
        await until(a, lambda: not membership.degraded.is_set(), 30)  # back, by itself
        assert membership.leading and membership.generation == 2
        assert (await healthz(a.web.url))[1] == {"status": "ok"}
        await channel.push("after")
        replies = await channel.wait_for(2, max_wait=20)
        assert not a.guard.fenced.is_set()  # never stopped
    assert [m.text for m in replies] == ["echo: before", "echo: after"]


class LosesTheDatabaseAfterSending(MemoryChannel):
    """A platform that took the first answer just as the database went away: the node
    knows it was sent, but cannot record it until the database is back."""

    def __init__(self, server: OwnServer) -> None:
        super().__init__()
        self._server = server
        self.went_away = False

    async def send(self, message: OutboundMessage) -> str | None:
        receipt = await super().send(message)
        if not self.went_away:
            self.went_away = True
            await asyncio.to_thread(self._server.stop)
        return receipt


async def test_an_answer_sent_as_the_database_goes_away_is_recorded_not_sent_again(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, own_server: OwnServer
) -> None:
    settings = make_settings(home=tmp_path / "a", storage={"url": own_server.url})
    channel = LosesTheDatabaseAfterSending(own_server)
    async with Gateway(settings, channels=[channel]) as a:
        assert isinstance(a.guard, ClusterGuard)
        membership = a.guard.membership
        await channel.push("before")
        await channel.wait_for(1)
        await asyncio.wait_for(membership.degraded.wait(), 15)
        await asyncio.to_thread(own_server.start)
        await until(a, lambda: not membership.degraded.is_set(), 30)
        await channel.push("after")
        replies = await channel.wait_for(2, max_wait=20)
        await a.wait_idle()
    assert [m.text for m in channel.sent] == ["echo: before", "echo: after"]
    assert [m.text for m in replies] == ["echo: before", "echo: after"]


async def test_a_node_whose_connections_are_all_cut_reconnects_and_works_on(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    def node(name: str) -> Settings:
        return make_settings(home=tmp_path / name, storage={"url": pg_url}, node={"name": name})

    channel = MemoryChannel()
    async with Gateway(node("a"), channels=[channel]) as a:
        b = Gateway(node("b"), channels=[MemoryChannel()])
        joining = asyncio.create_task(b.start())  # a standby that runs turns
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            assert isinstance(b.guard, ClusterGuard)
            membership = b.guard.membership

            async def three_again() -> bool:
                nodes = {n.name: n for n in await a.store.nodes.listing()}
                return "b" in nodes and nodes["b"].connections == 3

            async with asyncio.timeout(15):  # its listener connects in the background
                await a.bus.wait_until(three_again)
            with psycopg.connect(pg_url, autocommit=True) as admin:
                (ended,) = admin.execute(
                    "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM"
                    " pg_stat_activity WHERE application_name LIKE 'switchboard % b'"
                    " AND datname = current_database()) t"
                ).fetchone()
            assert ended == 3  # its store, membership and listener connections
            await asyncio.wait_for(membership.degraded.wait(), 10)
            await until(b, lambda: not membership.degraded.is_set(), 20)
            assert membership.generation == 2 and not b.guard.fenced.is_set()
            async with asyncio.timeout(15):  # the store and the listener reconnect too
                await a.bus.wait_until(three_again)
            for i in range(4):  # the cluster answers, b taking its share
                await channel.push(f"m{i}", chat_id=f"c{i}")
            replies = await channel.wait_for(4, max_wait=20)
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()
    assert sorted(m.text for m in replies) == [f"echo: m{i}" for i in range(4)]


@pytest.mark.timeout(120)
async def test_the_leader_leads_again_after_a_long_outage_and_the_standby_waits(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, own_server: OwnServer
) -> None:
    """Ten seconds without the database: a standby backs off to attempts seconds apart,
    the leader keeps trying every half second, so once the server is back the leader has
    its lead again before the standby's hold-off ends (a standby that took over while the
    old leader's receivers still ran made two nodes receive, and on one machine the second
    exited)."""

    def node(name: str) -> Settings:
        return make_settings(
            home=tmp_path / name, storage={"url": own_server.url}, node={"name": name}
        )

    async with Gateway(node("a"), channels=[MemoryChannel()]) as a:
        b = Gateway(node("b"), channels=[MemoryChannel()])
        joining = asyncio.create_task(b.start())  # a standby: start() waits to lead
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            assert isinstance(a.guard, ClusterGuard) and isinstance(b.guard, ClusterGuard)
            leader, standby = a.guard.membership, b.guard.membership
            await asyncio.to_thread(own_server.stop)
            await asyncio.wait_for(leader.degraded.wait(), 15)
            await asyncio.sleep(10)  # the outage: long enough for a backoff of seconds
            await asyncio.to_thread(own_server.start)
            await until(a, lambda: not leader.degraded.is_set(), 30)
            # the standby tries every MAX_BACKOFF seconds at most, and a try may meet the
            # server still starting: two of them, and a loaded machine's slowness
            await until(b, lambda: not standby.degraded.is_set(), 2 * MAX_BACKOFF + 25)
            assert leader.leading and not standby.leading
            assert not a.guard.fenced.is_set() and not joining.done()
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()


async def test_a_node_cut_off_waits_for_its_old_session_to_end_and_works_on(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    """Right after ``pg_terminate_backend`` the server may still hold the node's name for
    its ending session: the node reconnects once it is free (it took that for another
    node of its name and stopped trying, degraded for good)."""
    settings = make_settings(home=tmp_path / "a", storage={"url": pg_url}, node={"name": "a"})
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as a:
        assert isinstance(a.guard, ClusterGuard)
        membership = a.guard.membership
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE"
                " application_name = 'switchboard node a' AND datname = current_database()"
            )
            # the name stays taken, as by a session the server has not ended yet
            admin.execute("SELECT pg_advisory_lock(%s)", [name_lock("a")])
            await asyncio.wait_for(membership.degraded.wait(), 10)
            await asyncio.sleep(2)  # how long the old session takes to end
            admin.execute("SELECT pg_advisory_unlock(%s)", [name_lock("a")])
            await until(a, lambda: not membership.degraded.is_set(), 20)
        await channel.push("after")
        replies = await channel.wait_for(1, max_wait=20)
        assert not a.guard.fenced.is_set()
    assert [m.text for m in replies] == ["echo: after"]
