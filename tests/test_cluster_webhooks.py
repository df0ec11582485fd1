"""Webhooks on every node of a cluster: WhatsApp's signed POSTs and the signed hooks are
taken by a node that does not lead as well as by the leader, journaled in the shared
database, and answered once through the leader's outbox; a hook's body re-sent to the
other node under a new delivery id is no second turn. Real ``switchboard run``
processes on PostgreSQL, the fake Graph API, real signed POSTs."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from channels.hooks.signature import sign
from gateway.store import Store
from gateway.web.endpoint import ENDPOINT_FILE
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.fakes.whatsapp import (
    APP_SECRET,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    FakeGraph,
    body,
    message,
    post_signed,
)
from tests.nodes import Node, node_env, start_node
from tests.test_cli import switchboard

pytestmark = pytest.mark.slow

DANA = "4915112345678"
HOOK_SECRET = "hook-secret-0123456789abcdef"
WEBHOOK = "whatsapp/webhook"


@asynccontextmanager
async def two_nodes(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, graph: FakeGraph, url: str
) -> AsyncIterator[list[tuple[Node, str]]]:
    """A leader and a node that does not lead, each with WhatsApp, a signed hook and its
    own web server; yields each node with its server's base URL."""
    nodes: list[tuple[Node, str]] = []
    try:
        for i in range(2):
            name = f"node-{i}"
            env = node_env(tmp_path, fake_llm, tg, url, name)
            env.update(
                SWITCHBOARD_WEB__ENABLED="true",
                SWITCHBOARD_WEB__PORT="0",
                SWITCHBOARD_WHATSAPP__ACCESS_TOKEN=TOKEN,
                SWITCHBOARD_WHATSAPP__PHONE_NUMBER_ID=PHONE_NUMBER_ID,
                SWITCHBOARD_WHATSAPP__APP_SECRET=APP_SECRET,
                SWITCHBOARD_WHATSAPP__VERIFY_TOKEN=VERIFY_TOKEN,
                SWITCHBOARD_WHATSAPP__BASE_URL=graph.base_url,
                SWITCHBOARD_WHATSAPP__ALLOW_FROM=DANA,
            )
            await switchboard("onboard", env=env)
            home = tmp_path / name
            with (home / "config.toml").open("a") as config:
                config.write(f'\n[hooks.ci]\nsecret = "{HOOK_SECRET}"\n')
                config.write(f'deliver_to = "whatsapp:{DANA}"\n')
            node = await start_node(name, env)
            await asyncio.wait_for((node.standby if i else node.ready).wait(), 30)
            endpoint = json.loads((home / "data" / ENDPOINT_FILE).read_text())
            nodes.append((node, str(endpoint["url"])))
        yield nodes
    finally:
        for node, _ in nodes:
            if node.process.returncode is None:
                node.process.send_signal(signal.SIGTERM)
        for node, _ in nodes:
            await asyncio.wait_for(node.process.wait(), 30)


async def settled(home: Path, url: str, timeout: float = 30) -> None:
    """Wait until the cluster has nothing left to send (another process's store)."""
    async with Store(home / "data" / "switchboard.db", url=url) as store:
        async with asyncio.timeout(timeout):
            while await store.outbox.pending_count():  # noqa: ASYNC110 - another process's
                await asyncio.sleep(0.1)


def texts(graph: FakeGraph) -> list[str]:
    return [c.body["text"]["body"] for c in graph.sent() if c.body.get("type") == "text"]


@pytest.mark.timeout(120)
async def test_a_node_that_does_not_lead_takes_webhooks_and_each_is_answered_once(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram, graph: FakeGraph, pg_url: str
) -> None:
    async with two_nodes(tmp_path, fake_llm, tg, graph, pg_url) as nodes:
        (leader, leader_url), (standby, standby_url) = nodes
        assert standby.standby.is_set() and not standby.ready.is_set()  # it does not lead
        first = body(message(DANA, text="hello from the phone"))

        response = await post_signed(standby_url + WEBHOOK, first)
        assert response.status == 200  # journaled by the node that does not lead
        await graph.wait_for(lambda: len(texts(graph)) >= 1, 30)
        assert texts(graph) == ["echo: hello from the phone"]

        again = await post_signed(leader_url + WEBHOOK, first)  # Meta redelivers elsewhere
        assert again.status == 200
        forged = await post_signed(standby_url + WEBHOOK, first, secret="wrong-secret")
        assert forged.status == 401

        payload = b'{"event": "deploy finished"}'
        async with aiohttp.ClientSession() as http:
            async with http.post(
                standby_url + "hooks/ci",
                data=payload,
                headers={
                    "X-Switchboard-Signature": sign(
                        HOOK_SECRET, payload, "deploy-1", int(time.time())
                    ),
                    "X-Switchboard-Delivery": "deploy-1",
                    "Content-Type": "application/json",
                },
            ) as hook:
                assert hook.status == 202
            async with http.post(  # its body again, re-signed under a new id, to the leader
                leader_url + "hooks/ci",
                data=payload,
                headers={
                    "X-Switchboard-Signature": sign(
                        HOOK_SECRET, payload, "deploy-2", int(time.time())
                    ),
                    "X-Switchboard-Delivery": "deploy-2",
                    "Content-Type": "application/json",
                },
            ) as replayed:
                assert (replayed.status, (await replayed.json())["status"]) == (200, "duplicate")
            async with http.get(standby_url + "healthz") as alive:
                assert alive.status == 200
            async with http.get(standby_url + "readyz") as ready:
                assert ready.status == 503  # a load balancer sends pages to the leader
            async with http.get(standby_url + "api/status") as page:
                assert page.status == 503
            async with http.get(leader_url + "readyz") as leading:
                assert leading.status == 200
        await graph.wait_for(lambda: len(texts(graph)) >= 2, 30)
        second = body(message(DANA, text="and once more"))
        assert (await post_signed(standby_url + WEBHOOK, second)).status == 200
        await graph.wait_for(lambda: "echo: and once more" in texts(graph), 30)
        await settled(tmp_path / "node-0", pg_url)  # its send recorded before it dies

        leader.process.send_signal(signal.SIGKILL)  # the other node leads: it serves it all
        await leader.process.wait()
        await asyncio.wait_for(standby.ready.wait(), 30)
        async with aiohttp.ClientSession() as http, http.get(standby_url + "readyz") as ready:
            assert ready.status == 200
    answers = texts(graph)
    assert answers.count("echo: hello from the phone") == 1  # the redelivery: no second turn
    assert len(answers) == 3 and "deploy finished" in answers[1]  # the hook's turn, delivered
    assert answers[2] == "echo: and once more"
    assert leader.ready.is_set()
