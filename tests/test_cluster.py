"""Several nodes on one PostgreSQL database: one leads (receives, runs turns, sends, runs the
scheduler), the others wait; when the leader dies another takes over within seconds and
nothing is lost or doubled. Node processes are real ``switchboard run`` subprocesses talking
to the fake Telegram and the fake LLM."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from gateway.core.errors import AnotherInstanceRunning
from gateway.core.messages import ChatRef
from gateway.core.schedule_spec import ScheduleSpec
from gateway.store import Job, Store
from gateway.store.cluster.membership import Membership
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram, random_token
from tests.nodes import STREAMING, cluster, node_env, streamed, written_echo
from tests.test_cli import switchboard

pytestmark = pytest.mark.slow


@pytest.fixture
async def migrated(pg_url: str, tmp_path: Path) -> str:
    """``pg_url``'s database with the store's tables, as every node finds it: a node's
    heartbeat reads the schema version, and a working node whose heartbeat fails pauses
    (letting its lead go), which would race with what these tests look at."""
    async with Store(tmp_path / "unused", url=pg_url):
        pass
    return pg_url


def member(url: str, name: str, **kwargs: object) -> Membership:
    return Membership(url, name, host="test", pid=1, interval=0.2, **kwargs)  # type: ignore[arg-type]


async def test_one_node_leads_and_a_standby_takes_over_when_it_goes(migrated: str) -> None:
    first, second = member(migrated, "a"), member(migrated, "b")
    await first.start()
    await second.start()
    try:
        await asyncio.wait_for(first.lead(), 5)
        waiting = asyncio.create_task(second.lead())
        await asyncio.sleep(0)  # (not synchronization: the task must simply have begun)
        assert await second.leader() == "a"
        assert not waiting.done()
        await first.stop()  # its connection ends: the lock goes with it
        await asyncio.wait_for(waiting, 5)
        assert second.leading and await second.leader() == "b"
    finally:
        await first.stop()
        await second.stop()


async def test_a_leader_cut_off_takes_the_lead_back_or_stops_if_another_node_took_it(
    migrated: str,
) -> None:
    lost = asyncio.Event()
    node = member(migrated, "a", on_lost=lost.set)
    other = member(migrated, "b")
    await node.start()
    await other.start()
    try:
        await node.lead()
        node.working = other.working = True
        racing = asyncio.create_task(other.lead())  # tries the lock every interval
        with psycopg.connect(migrated, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'switchboard node a'"
            )
        await asyncio.wait_for(node.degraded.wait(), 5)  # paused, not stopped
        assert not node.leading
        # back: leading again, or stopping for the node that took the lead meanwhile
        back = [asyncio.ensure_future(lost.wait()), asyncio.ensure_future(node.resumed.wait())]
        done, pending = await asyncio.wait(back, timeout=10, return_when="FIRST_COMPLETED")
        for waiting in pending:
            waiting.cancel()
        assert done
        # exactly one leader; the one that lost the lead says so (it must stop)
        assert node.leading != other.leading
        assert lost.is_set() == other.leading
        assert node.generation == 2
        racing.cancel()
    finally:
        await node.stop()
        await other.stop()


async def test_a_second_node_with_a_live_nodes_name_is_refused(pg_url: str) -> None:
    """It would overwrite the first node's row, and delete it when it stopped."""
    first = member(pg_url, "twin")
    await first.start()
    try:
        with pytest.raises(AnotherInstanceRunning, match="already called 'twin'"):
            await member(pg_url, "twin").start()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            rows = admin.execute("SELECT pid FROM cluster_nodes WHERE name = 'twin'").fetchall()
        assert rows == [(1,)]  # the live node's row is untouched
    finally:
        await first.stop()
    again = member(pg_url, "twin")  # the name is free once its node stopped
    await again.start()
    await again.stop()


# -- whole processes -------------------------------------------------------------------


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    fake = await FakeTelegram(random_token()).start()
    yield fake
    await fake.stop()


async def answered(tg: FakeTelegram, chats: range, per_chat: int, timeout: float) -> None:
    """Each chat shows its first ``per_chat`` answers complete (a draft still growing
    does not count)."""
    await tg.wait_for(
        lambda: all(
            tg.visible(c)[:per_chat] == [f"echo: c{c} m{r}" for r in range(per_chat)] for c in chats
        ),
        timeout,
    )


# its own waits bound each round (a minute per round, half a minute for the takeover): the
# whole, three processes and a takeover on a loaded machine, may take longer than the default
@pytest.mark.timeout(240)
async def test_three_nodes_answer_every_message_once_in_order_across_a_kill(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, pg_url: str
) -> None:
    chats, rounds = range(1001, 1021), 3
    fake_llm.latency = 0.3  # turns are in flight when the leader dies
    fake_llm.responder = written_echo
    logs = tmp_path / "logs"
    logs.mkdir()
    async with cluster(tmp_path, fake_llm, tg, pg_url, 3, logs=logs, **STREAMING) as nodes:
        leader, *standbys = nodes
        assert not any(n.ready.is_set() for n in standbys)

        code, out, err = await switchboard(
            "status", "--json", env=node_env(tmp_path, fake_llm, tg, pg_url, "node-1")
        )
        assert code == 0, err
        listed = {n["name"]: n["role"] for n in json.loads(out)["nodes"]}
        assert listed == {"node-0": "leader", "node-1": "standby", "node-2": "standby"}

        for round_ in range(rounds):
            for chat in chats:
                await tg.say(f"c{chat} m{round_}", chat_id=chat, user_id=chat)
            if round_ == 1:  # mid-run: the leader (the poller) dies without a goodbye
                await fake_llm.wait_for_requests(len(chats) + 5, timeout=30)
                leader.process.send_signal(signal.SIGKILL)
                await leader.process.wait()
                await asyncio.wait_for(
                    asyncio.wait(
                        [asyncio.create_task(n.ready.wait()) for n in standbys],
                        return_when=asyncio.FIRST_COMPLETED,
                    ),
                    30,
                )
            await answered(tg, chats, round_ + 1, timeout=60)
        assert sum(n.ready.is_set() for n in standbys) == 1  # exactly one took over
        code, out, err = await switchboard(
            "status", "--json", env=node_env(tmp_path, fake_llm, tg, pg_url, "node-1")
        )
        assert code == 0, err
        roles = {n["name"]: n["role"] for n in json.loads(out)["nodes"]}
        assert roles["node-0"] == "gone" and sorted(roles.values()) == ["gone", "leader", "standby"]

    for chat in chats:  # every message answered once, in order, no draft beside it
        assert tg.visible(chat) == [f"echo: c{chat} m{r}" for r in range(rounds)], chat
    assert streamed(tg) > 0
    # the standbys streamed drafts through a Telegram connection they never started: each
    # closed it when stopped (SIGTERM) instead of leaving it to the collector's complaint
    for log in logs.iterdir():
        assert "Unclosed" not in log.read_text(), log.name


async def test_a_scheduled_job_fires_once_across_three_nodes(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, pg_url: str
) -> None:
    owner = {"channel": "telegram", "sender_id": "7", "role": "owner"}
    start = datetime.now(UTC)
    async with Store(tmp_path / "unused", url=pg_url) as store:
        for job_id, text, after in (("reminder", "water the plants", 8), ("later", "done", 9)):
            at = start + timedelta(seconds=after)
            spec = ScheduleSpec("once", "UTC", at=at)
            chat = ChatRef("telegram", "7")
            await store.jobs.add(Job(job_id, spec, None, text, chat, owner, next_run=at))
    async with cluster(tmp_path, fake_llm, tg, pg_url, 3):
        await tg.wait_for(lambda: "done" in tg.texts(7), timeout=30)
    # the job after it arrived after it (one chat keeps its order): nothing fired twice
    assert tg.texts(7) == ["water the plants", "done"]
