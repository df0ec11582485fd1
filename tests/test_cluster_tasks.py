"""Background tasks in a cluster: one spawned by a turn on a node that does not lead runs
there (it waited, before, until that node led), and stopping it through the task API, which
the leader serves, cuts its turn on that node at once (it ran on to its end, before). Two
gateways in this process on one PostgreSQL database, each taking one session at a time, so
that the test decides which node runs which chat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Recorded, Responder, Step, calls, held, text
from tests.test_cli import cli_env, switchboard
from tests.test_openai_api import OWNER_TOKEN, api_settings

pytestmark = pytest.mark.slow

TASK = "Count the stars slowly."


@asynccontextmanager
async def two_nodes(
    tmp_path: Path, make_settings: SettingsFactory, pg_url: str, busy: str
) -> AsyncIterator[tuple[Gateway, Gateway, MemoryChannel]]:
    """Node a leads (its channel receives; its web server answers the task API) and runs the
    chat ``busy`` (its model call held by the test); node b joins, so the next chat is b's."""

    def node(name: str) -> Settings:
        return api_settings(
            make_settings,
            home=tmp_path / name,
            storage={"url": pg_url},
            node={"name": name},
            limits={"max_concurrent_turns": 1},  # one session at a time on each node
        )

    channel = MemoryChannel()
    async with Gateway(node("a"), channels=[channel]) as a:
        await channel.push("chat one: hold on", chat_id=busy)
        b = Gateway(node("b"), channels=[MemoryChannel()])
        joining = asyncio.create_task(b.start())  # runs turns; leads only once a is gone
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            yield a, b, channel
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()


def answers(chat_one: asyncio.Event, task: asyncio.Event) -> Responder:
    """Chat one waits for ``chat_one``; chat two spawns the task; the task waits for
    ``task`` (never set: only a stop ends it)."""

    def respond(request: Recorded) -> Step:
        last = request.last_user_text
        if "chat one" in last:
            return held(chat_one, "one done")
        if TASK in request.system_text + last:
            return held(task, "142 stars")
        if not request.tool_results:
            return calls(("spawn", {"task": TASK, "task_type": "general"}))
        return text("Started it in the background.")

    return respond


async def test_a_task_spawned_on_a_node_that_does_not_lead_runs_there_and_stops_at_once(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    chat_one, task_done = asyncio.Event(), asyncio.Event()
    fake_llm.responder = answers(chat_one, task_done)
    async with two_nodes(tmp_path, make_settings, pg_url, busy="c1") as (a, b, channel):
        await fake_llm.wait_for_requests(1)  # a runs chat one
        await channel.push("chat two: count the stars for me", chat_id="c2")
        [started] = await channel.wait_for(1, chat_id="c2", max_wait=20)
        assert started.text == "Started it in the background."
        # the task's model call, made on b, the node whose turn spawned it
        await fake_llm.wait_for_requests(4, timeout=20)
        [task] = b.subagents.running()
        assert a.subagents.running() == [] and a.web is not None
        async with (
            aiohttp.ClientSession() as http,
            http.delete(
                f"{a.web.url}v1/tasks/{task.id}",
                headers={"Authorization": f"Bearer {OWNER_TOKEN}"},
            ) as response,
        ):
            assert response.status == 200, await response.text()
        # b cuts the task's turn now, without waiting for its model call to end
        [_, told] = await channel.wait_for(2, chat_id="c2", max_wait=20)
        assert told.text.startswith(f"Background task {task.id} stopped"), told.text
        assert not task_done.is_set()
        chat_one.set()
        await channel.wait_for(1, chat_id="c1", max_wait=20)


async def test_an_api_answer_from_a_turn_on_another_node_reaches_the_client(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    """The leader's web server takes the request; the turn runs on b (a is busy): its answer
    comes back through the outbox, and the client gets it (it waited until the time limit)."""
    chat_one = asyncio.Event()

    def respond(request: Recorded) -> Step:
        if "chat one" in request.last_user_text:
            return held(chat_one, "one done")
        return text("Answered on the other node.")

    fake_llm.responder = respond
    async with two_nodes(tmp_path, make_settings, pg_url, busy="c1") as (a, _b, channel):
        await fake_llm.wait_for_requests(1)  # a runs chat one
        assert a.web is not None
        body = {"model": "main", "messages": [{"role": "user", "content": "hello from the API"}]}
        headers = {"Authorization": f"Bearer {OWNER_TOKEN}", "X-Switchboard-Session": "s1"}
        async with (
            aiohttp.ClientSession(headers=headers) as http,
            asyncio.timeout(20),
            http.post(f"{a.web.url}v1/chat/completions", json=body) as response,
        ):
            assert response.status == 200, await response.text()
            answer = await response.json()
        chat_one.set()
        await channel.wait_for(1, chat_id="c1", max_wait=20)
    assert answer["choices"][0]["message"]["content"] == "Answered on the other node."
    assert len(fake_llm.requests) == 2  # one turn each, the API's on b


async def test_from_another_home_the_cli_sees_the_running_cluster_and_chat_does_not_join_it(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    """A home whose store is a running cluster's, with no node of its own: `status` says the
    cluster runs (it said "not running"), and `chat -m` refuses rather than start a gateway
    that would join the cluster as one more node (it hung there, silent)."""
    settings = make_settings(home=tmp_path / "a", storage={"url": pg_url}, node={"name": "a"})
    env = cli_env(tmp_path / "elsewhere", fake_llm, SWITCHBOARD_STORAGE__URL=pg_url)
    async with Gateway(settings, channels=[MemoryChannel()]):
        status = await switchboard("status", env=env)
        chat = await switchboard("chat", "-m", "hi", env=env)
        told = await switchboard("config", "set", "agent.reflection", "false", env=env)
        link = await switchboard("web", env=env)
    code, out, _ = status
    assert code == 0, status
    assert out.startswith("gateway: not running from this home; its cluster runs on 1 node(s)")
    assert "node a: leader" in out
    code, _, err = chat
    assert code != 0 and "node a on " in err and "would join the cluster" in err
    assert fake_llm.requests == []
    code, out, _ = told
    assert code == 0 and "the cluster's nodes (a) that share this home reload" in out
    code, _, err = link
    assert code == 1 and "the cluster runs on a: run this in the home of the node" in err
