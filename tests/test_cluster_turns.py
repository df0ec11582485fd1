"""Turns on every node: three ``switchboard run`` processes on one PostgreSQL database share
the turns (the leader only receives and sends), every message is answered once and in order
per chat, and a node that dies in the middle of its turns loses nothing: another node
resumes them. Real processes, the fake Telegram and the fake LLM (see tests/test_cluster.py).
Also: the NOTIFY wake-ups, and an approval decided on one node waking a turn parked on
another (two gateways in this process on one database).
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from gateway.core.messages import InboundMessage, OutboundMessage
from gateway.runtime.app import Gateway
from gateway.store import Store
from gateway.store.cluster.listener import Listener
from gateway.store.engine.sql import INBOUND_TOPIC, OUTBOX_TOPIC
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Recorded, Step
from tests.fakes.telegram import FakeTelegram, random_token
from tests.nodes import (
    STREAMING,
    Node,
    asked_by,
    cluster,
    node_env,
    node_key,
    streamed,
    written_echo,
)
from tests.test_approvals import MEMBER, OWNER, approval_settings, ask_for_exec, request_id, runs
from tests.test_cli import switchboard

pytestmark = pytest.mark.slow


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    fake = await FakeTelegram(random_token()).start()
    yield fake
    await fake.stop()


async def wait_status(
    env: dict[str, str], predicate: Callable[[list[dict[str, Any]]], bool], timeout: float
) -> list[dict[str, Any]]:
    """``switchboard status --json``'s nodes, once ``predicate`` holds for them (the nodes
    report their sessions and turns with each heartbeat)."""
    async with asyncio.timeout(timeout):
        while True:
            code, out, err = await switchboard("status", "--json", env=env)
            assert code == 0, err
            nodes: list[dict[str, Any]] = json.loads(out)["nodes"]
            if predicate(nodes):
                return nodes


async def converse(tg: FakeTelegram, chat: int, messages: int, timeout: float) -> None:
    """One person writing ``messages`` messages, each once the answer to the one before
    arrived complete (so no two are folded into one turn; a draft does not count)."""
    for i in range(messages):
        await tg.say(f"c{chat} m{i}", chat_id=chat, user_id=chat)
        try:
            await tg.wait_for(lambda n=i + 1: tg.visible(chat)[:n] == expected(chat, n), timeout)
        except TimeoutError:  # what the person sees, for the failure's message
            raise AssertionError(f"chat {chat} after m{i}: {tg.visible(chat)}") from None


def expected(chat: int, messages: int) -> list[str]:
    return [f"echo: c{chat} m{i}" for i in range(messages)]


@pytest.mark.timeout(180)  # 500 turns on 3 processes: past the global 60 s on a loaded machine
async def test_three_nodes_share_the_turns_of_100_chats(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, pg_url: str
) -> None:
    chats, messages = range(2001, 2101), 5
    fake_llm.latency = 0.05
    async with cluster(tmp_path, fake_llm, tg, pg_url, 3):
        # the test's own bound (a clear failure) comes well before the timeout mark's kill
        async with asyncio.timeout(120):
            await asyncio.gather(*(converse(tg, chat, messages, 40) for chat in chats))
        # every node ran turns (the counters arrive with the next heartbeat)
        nodes = await wait_status(
            node_env(tmp_path, fake_llm, tg, pg_url, "node-0"),
            lambda nodes: sum(n["turns"] for n in nodes) >= len(chats) * messages,
            15,
        )
    for chat in chats:  # every message answered once, in order
        assert tg.visible(chat) == expected(chat, messages), chat
    turns = {n["name"]: n["turns"] for n in nodes}
    assert sum(turns.values()) == len(chats) * messages, turns
    assert sum(1 for count in turns.values() if count > 0) >= 2, turns


async def test_a_node_killed_in_its_turns_loses_nothing_and_doubles_nothing(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, pg_url: str
) -> None:
    # turns are in flight when the node dies: each chat talks for several seconds, longer
    # than the status (heartbeats a second apart) can lag behind
    chats, messages = range(3001, 3031), 6
    fake_llm.latency = 0.5
    asking: asyncio.Queue[str] = asyncio.Queue()  # which node each model call comes from

    def noted(request: Recorded) -> Step:
        asking.put_nowait(asked_by(request))
        return written_echo(request)  # answered over a second from now: latency, then words

    fake_llm.responder = noted
    async with cluster(tmp_path, fake_llm, tg, pg_url, 3, **STREAMING) as nodes:
        talks = [asyncio.create_task(converse(tg, chat, messages, 45)) for chat in chats]
        # status lists the sessions in flight on a node that does not lead
        listed = await wait_status(
            node_env(tmp_path, fake_llm, tg, pg_url, "node-0"),
            lambda nodes: any(n["role"] != "leader" and n["sessions_in_flight"] > 0 for n in nodes),
            20,
        )
        busy = next(n for n in listed if n["role"] != "leader" and n["sessions_in_flight"] > 0)
        assert busy["sessions"] and all(s.startswith("telegram:") for s in busy["sessions"])
        # the victim: a node that does not lead, killed while the model writes for its turn
        leader = next(n["name"] for n in listed if n["role"] == "leader")
        while not asking.empty():  # calls made before now may have been answered already
            asking.get_nowait()
        async with asyncio.timeout(20):
            while (key := await asking.get()) == node_key(leader):
                pass
        victim: Node = next(n for n in nodes if node_key(n.name) == key)
        victim.process.send_signal(signal.SIGKILL)
        await victim.process.wait()
        await asyncio.gather(*talks)
    for chat in chats:  # nothing lost, nothing doubled (no draft beside an answer), in order
        assert tg.visible(chat) == expected(chat, messages), chat
    assert streamed(tg) > 0
    with psycopg.connect(pg_url) as conn:  # it died in a turn, which another node resumed
        (resumed,) = conn.execute("SELECT COUNT(*) FROM turns WHERE attempts > 1").fetchone()
    assert resumed >= 1


async def test_journaled_messages_and_queued_replies_wake_every_node(
    tmp_path: Path, pg_url: str
) -> None:
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    topics = {
        topic: lambda payload, topic=topic: heard.put_nowait((topic, payload))
        for topic in (INBOUND_TOPIC, OUTBOX_TOPIC)
    }
    async with Store(tmp_path / "unused", url=pg_url) as store, Listener(pg_url, topics) as ears:
        await asyncio.wait_for(ears.connected.wait(), 10)
        # after connecting, each topic is told to look once (whatever was missed meanwhile)
        assert {heard.get_nowait(), heard.get_nowait()} == {(INBOUND_TOPIC, ""), (OUTBOX_TOPIC, "")}
        message = InboundMessage(
            channel="t", chat_id="1", sender_id="u", text="hi", platform_message_id="1"
        )
        await store.journal.accept(message)
        assert await asyncio.wait_for(heard.get(), 5) == (INBOUND_TOPIC, "")
        reply = OutboundMessage(channel="telegram", chat_id="1", text="hi", idempotency_key="k")
        await store.outbox.enqueue([reply])
        assert await asyncio.wait_for(heard.get(), 5) == (OUTBOX_TOPIC, "telegram")
        await store.outbox.enqueue([reply])  # already queued: nothing new, nobody woken
        await store.journal.accept(message)  # a duplicate: nobody woken either
        second = InboundMessage(
            channel="t", chat_id="1", sender_id="u", text="hi", platform_message_id="2"
        )
        await store.journal.accept(second)  # the next wake-up is the next message's
        assert await asyncio.wait_for(heard.get(), 5) == (INBOUND_TOPIC, "")


async def test_an_approval_decided_on_one_node_wakes_the_turn_parked_on_another(
    tmp_path: Path, make_settings: SettingsFactory, fake_llm: FakeLLM, pg_url: str
) -> None:
    def node(name: str, **limits: int) -> Settings:
        settings = approval_settings(make_settings)  # an owner, a member, approvals asked
        return make_settings(
            home=tmp_path / name,
            telegram=settings.telegram.model_dump(),
            tools={"approvals": "ask", "exec": {"sandbox": "off"}},
            storage={"url": pg_url},
            node={"name": name},
            limits=limits,
        )

    # "b" leads (it receives and sends) and can hold one session at a time: once the
    # member's turn is parked there, the owner's /approve can only run on "a"
    b_settings = node("b", max_concurrent_turns=1)
    channel = MemoryChannel("telegram")
    async with Gateway(b_settings, channels=[channel]) as b:
        request = await ask_for_exec(channel, fake_llm)
        await channel.wait_for(1, chat_id=MEMBER)  # told that it waits
        assert b.load.sessions == {f"telegram:{MEMBER}"}  # held, running or parked
        a = Gateway(node("a"), channels=[MemoryChannel("telegram")])
        joining = asyncio.create_task(a.start())  # runs turns; waits to lead until b goes
        try:
            await asyncio.wait_for(a.guard.standby.wait(), 10)
            await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
            decided = (await channel.wait_for(2, chat_id=OWNER))[1]
            answer = (await channel.wait_for(2, chat_id=MEMBER, max_wait=15))[1]
            turns_on_a = a.load.turns_run
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
    assert decided.text.startswith("Approved") and turns_on_a == 1  # decided on "a"
    assert answer.text == "Done, it ran." and runs(b_settings) == 1  # resumed on "b", once
