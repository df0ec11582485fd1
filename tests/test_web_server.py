"""The web server over HTTP: who gets in, cross-site refusals, health, metrics, pairing.

These drive the real gateway (web chat channel, fake LLM) with an aiohttp client; the
browser tests in test_web_browser.py cover what a person sees on the pages.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from channels.memory import MemoryChannel
from channels.webchat import WebChatChannel, create
from gateway.config.settings import Settings, load_settings
from gateway.core.errors import ConfigError
from gateway.core.services import ScheduledItem
from gateway.runtime.app import Gateway
from gateway.runtime.intake.pairing import WELCOME
from gateway.web.access.security import KEY_HEADER
from gateway.web.status import schedule
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.nodes import spawn

TOKEN = "test-token-0123456789abcdef"
EVIL = "http://evil.example"


@asynccontextmanager
async def serving(
    settings: Settings, *extra: MemoryChannel
) -> AsyncIterator[tuple[Gateway, str, WebChatChannel]]:
    chat = create(settings)
    async with Gateway(settings, channels=[chat, *extra]) as gateway:
        assert gateway.web is not None
        yield gateway, gateway.web.url, chat


def client() -> aiohttp.ClientSession:
    """A browser that has not signed in."""
    # unsafe=True: keep cookies for 127.0.0.1 (aiohttp drops cookies of IP hosts otherwise)
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


def page_key(signed_in_page: str) -> str:
    """The page key a sign-in hands its page (what static/signin.js keeps)."""
    found = re.search(r'data-key="([^"]+)"', signed_in_page)
    assert found is not None, signed_in_page
    return found[1]


@asynccontextmanager
async def owner(gateway: Gateway) -> AsyncIterator[aiohttp.ClientSession]:
    """The owner's browser: signed in with a one-time link, as `switchboard run` prints;
    its pages send the page key the sign-in handed them with every request."""
    assert gateway.web is not None
    async with client() as http:
        await sign_in(http, gateway.web.sign_in_link())
        yield http


async def sign_in(http: aiohttp.ClientSession, link: str) -> str:
    """Open a sign-in link as a browser does, and send the page key it hands the page with
    every request from now on, as the pages do; the key."""
    async with http.get(link, allow_redirects=False) as response:
        assert response.status == 200, await response.text()
        key = page_key(await response.text())
    http.headers[KEY_HEADER] = key
    return key


def message_form(text_: str, client_id: str = "msg-0000000001") -> aiohttp.FormData:
    form = aiohttp.FormData(default_to_multipart=True)
    form.add_field("id", client_id)
    form.add_field("text", text_)
    return form


async def next_event(ws: aiohttp.ClientWebSocketResponse, kind: str, role: str = "") -> Any:
    async with asyncio.timeout(10):
        while True:
            event = await ws.receive_json()
            if event["type"] == kind and (not role or event["entry"]["role"] == role):
                return event


# -- binding and authentication -----------------------------------------------------------


def test_non_loopback_bind_without_token_refuses_to_start(make_settings: SettingsFactory) -> None:
    with pytest.raises(ConfigError) as caught:
        make_settings(web={"host": "0.0.0.0"})
    assert caught.value.field == "web.token"
    assert "SWITCHBOARD_WEB__TOKEN" in str(caught.value)
    with pytest.raises(ConfigError, match="too short"):
        make_settings(web={"host": "0.0.0.0", "token": "short"})
    assert make_settings(web={"host": "0.0.0.0", "token": TOKEN}).web.token is not None
    assert make_settings(web={"host": "0.0.0.0", "enabled": False}).web.enabled is False


async def test_cli_run_refuses_a_network_bind_without_token(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SWITCHBOARD_HOME": str(tmp_path / "home"),
        "SWITCHBOARD_WEB__HOST": "0.0.0.0",
    }
    process = await spawn(env, asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert "web.token" in err.decode()
    assert "ready" not in out.decode()


async def test_cli_run_serves_the_web_chat_on_loopback(tmp_path: Path, fake_llm: FakeLLM) -> None:
    env = {
        **os.environ,
        "SWITCHBOARD_HOME": str(tmp_path / "home"),
        "SWITCHBOARD_WEB__PORT": "0",
        "SWITCHBOARD_LLM__BASE_URL": fake_llm.openai_url,
        "SWITCHBOARD_LLM__API_KEY": "sk-test",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "run", env=env, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode()
        assert line.startswith("web chat: http://127.0.0.1:")
        url = line.split()[2]
        async with client() as http, http.get(url + "healthz") as response:
            assert response.status == 200
            assert await response.json() == {"status": "ok"}
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0


async def test_gateway_without_the_web_chat_opens_no_port(
    make_settings: SettingsFactory,
) -> None:
    async with Gateway(make_settings(web={"port": 0}), channels=[MemoryChannel()]) as gateway:
        assert gateway.web is None


# -- cross-site protection ----------------------------------------------------------------


async def test_cross_site_posts_are_refused(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    async with (
        serving(make_settings(web={"port": 0})) as (gateway, url, _chat),
        owner(gateway) as http,
    ):
        async with http.post(
            url + "api/chat/messages", data=message_form("from evil"), headers={"Origin": EVIL}
        ) as response:
            assert response.status == 403
        async with http.post(url + "api/chat/messages", data=message_form("no origin")) as r:
            assert r.status == 403  # no Origin and no Bearer header: not trusted
        async with http.post(url + "api/pairing/ABCDEFGH/approve", headers={"Origin": EVIL}) as r:
            assert r.status == 403
        await gateway.wait_idle()
        assert fake_llm.requests == []  # nothing reached the model
        assert await gateway.store.journal.counts() == {}
        async with http.post(
            url + "api/chat/messages",
            data=message_form("hello"),
            headers={"Origin": url.rstrip("/")},
        ) as response:
            assert response.status == 200
            assert (await response.json())["status"] == "new"
        await gateway.wait_idle()
        assert [r.last_user_text for r in fake_llm.requests] == ["hello"]


async def test_socket_with_a_foreign_origin_is_refused(make_settings: SettingsFactory) -> None:
    async with (
        serving(make_settings(web={"port": 0})) as (gateway, url, _chat),
        owner(gateway) as http,
    ):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(url + "api/chat/socket", origin=EVIL)
        assert refused.value.status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await http.ws_connect(url + "api/chat/socket")  # no Origin at all
        async with http.ws_connect(url + "api/chat/socket", origin=url.rstrip("/")) as ws:
            hello = await ws.receive_json()
            assert hello["type"] == "hello"


# -- the chat over HTTP -------------------------------------------------------------------


async def test_retried_post_is_one_message_and_the_answer_replaces_the_stream(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text("first answer, streamed in pieces"))
    async with (
        serving(make_settings(web={"port": 0})) as (gateway, url, _chat),
        owner(gateway) as http,
    ):
        origin = url.rstrip("/")
        async with http.get(url) as page:
            assert page.status == 200
        async with http.ws_connect(url + "api/chat/socket", origin=origin) as ws:
            await ws.receive_json()
            for _ in range(2):  # the page retries after a network error: same id
                async with http.post(
                    url + "api/chat/messages",
                    data=message_form("question", "retry-id-000001"),
                    headers={"Origin": origin},
                ) as response:
                    assert response.status == 200
            deltas = []
            async with asyncio.timeout(10):
                while True:
                    event = await ws.receive_json()
                    if event["type"] == "delta":
                        deltas.append(event["text"])
                    if event["type"] == "message" and event["entry"]["role"] == "assistant":
                        break
            assert "".join(deltas) == "first answer, streamed in pieces"
            assert len(deltas) > 1
            assert event["entry"]["html"] == "<p>first answer, streamed in pieces</p>\n"
        await gateway.wait_idle()
        assert len(fake_llm.requests) == 1


async def test_pages_learn_when_a_turn_ends_and_drop_text_no_answer_replaces(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        text("a plain answer"),
        calls(("message", {"content": "Sent it already."})),
        text("Sent it already."),  # streamed, then not delivered again: it repeats the send
    )
    async with (
        serving(make_settings(web={"port": 0})) as (gateway, url, _chat),
        owner(gateway) as http,
    ):
        origin = url.rstrip("/")
        async with http.get(url):
            pass
        async with http.ws_connect(url + "api/chat/socket", origin=origin) as ws:
            await ws.receive_json()
            for number, question in enumerate(("first?", "second?")):
                async with http.post(
                    url + "api/chat/messages",
                    data=message_form(question, f"turn-end-{number:07d}"),
                    headers={"Origin": origin},
                ) as response:
                    assert response.status == 200
                done = await next_event(ws, "done")
                assert done["answered"] is (number == 0)
            await gateway.wait_idle()
        # A reload shows the delivered messages and no leftover streamed text.
        async with http.ws_connect(url + "api/chat/socket", origin=origin) as ws:
            hello = await ws.receive_json()
        assert hello["streaming"] == []
        answers = [e["text"] for e in hello["entries"] if e["role"] == "assistant"]
        assert answers == ["a plain answer", "Sent it already."]


async def test_the_conversation_survives_a_restart(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0})
    async with client() as http:
        for round_ in (1, 2):
            async with serving(settings) as (gateway, url, _chat):
                if round_ == 1:  # signed in once: the session outlives the restart
                    assert gateway.web is not None
                    await sign_in(http, gateway.web.sign_in_link())
                origin = url.rstrip("/")
                async with http.ws_connect(url + "api/chat/socket", origin=origin) as ws:
                    hello = await ws.receive_json()
                    assert len(hello["entries"]) == 2 * (round_ - 1)
                    async with http.post(
                        url + "api/chat/messages",
                        data=message_form(f"message {round_}", f"restart-id-{round_:04d}"),
                        headers={"Origin": origin},
                    ) as response:
                        assert response.status == 200
                    await next_event(ws, "message", "assistant")
                await gateway.wait_idle()
    texts = [e["text"] for e in hello["entries"]]
    assert texts == ["message 1", "echo: message 1"]
    assert fake_llm.requests[-1].user_texts == ["message 1", "message 2"]  # same session


async def test_attached_files_are_stored_and_oversized_ones_refused(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(web={"port": 0, "max_attachment_bytes": 1000})
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:
        origin = {"Origin": url.rstrip("/")}
        form = message_form("what is in this file?", "with-file-0001")
        form.add_field("file", b"hello notes", filename="notes.txt", content_type="text/plain")
        async with http.post(url + "api/chat/messages", data=form, headers=origin) as response:
            assert response.status == 200
            entry = (await response.json())["entry"]
        assert entry["files"] == [{"name": "notes.txt", "kind": "document", "size": 11, "index": 0}]
        stored = list((settings.workspace_dir / "attachments" / "webchat").rglob("*.txt"))
        assert len(stored) == 1
        assert stored[0].read_bytes() == b"hello notes"
        assert stored[0].name != "notes.txt"  # the browser's name is a label, never a path
        async with http.get(url + f"api/chat/files/{entry['id']}/0") as download:
            assert download.status == 200
            assert await download.read() == b"hello notes"
            assert download.headers["Content-Disposition"].startswith("attachment")
        big = message_form("too big", "with-file-0002")
        big.add_field("file", b"x" * 5000, filename="big.bin")
        async with http.post(url + "api/chat/messages", data=big, headers=origin) as response:
            assert response.status == 413
        assert len(list((settings.workspace_dir / "attachments").rglob("*.*"))) == 1
        await gateway.wait_idle()
        assert fake_llm.requests[0].last_user_text.startswith("what is in this file?")


# -- status data, pairing, workspace, metrics ---------------------------------------------


async def test_owner_approves_a_pairing_request_and_the_user_is_welcomed(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(web={"port": 0}, telegram={"token": "123:abc"})
    telegram = MemoryChannel("telegram")
    async with serving(settings, telegram) as (gateway, url, _chat), owner(gateway) as http:
        await telegram.push("hi, who are you?", sender_id="555", sender_name="Stranger")
        [pairing_notice] = await telegram.wait_for(1)
        async with http.get(url + "api/status") as response:
            [pending] = (await response.json())["pairing"]
        assert pending["code"] in pairing_notice.text
        assert pending["sender_id"] == "555"
        async with http.post(
            url + f"api/pairing/{pending['code']}/approve", headers={"Origin": url.rstrip("/")}
        ) as response:
            assert response.status == 200
        sent = await telegram.wait_for(2)
        assert sent[1].text == WELCOME
        assert await gateway.store.pairings.is_approved("telegram", "555")
        async with http.get(url + "api/status") as response:
            assert (await response.json())["pairing"] == []


async def test_workspace_view_shows_only_bootstrap_and_memory_files(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings(web={"port": 0})
    memory = settings.workspace_dir / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "2026-01-02.md").write_text("met Ann")
    secret = tmp_path / "secret.md"
    secret.write_text("top secret")
    (memory / "leak.md").symlink_to(secret)
    (settings.workspace_dir / "notes.md").write_text("not a bootstrap file")
    async with serving(settings) as (gateway, url, _chat), owner(gateway) as http:
        async with http.get(url + "api/status") as response:
            names = [f["name"] for f in (await response.json())["workspace"]]
        assert "AGENTS.md" in names
        assert "memory/2026-01-02.md" in names
        assert "memory/leak.md" not in names
        assert "notes.md" not in names
        async with http.get(url + "api/workspace/memory/2026-01-02.md") as response:
            assert (await response.json())["text"] == "met Ann"
        for bad in ("memory/leak.md", "notes.md", "..%2Fconfig.toml", "%2Fetc%2Fpasswd"):
            async with http.get(url + f"api/workspace/{bad}") as response:
                assert response.status == 404, bad


async def test_metrics_report_turns_tokens_and_queues(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    async with (
        serving(make_settings(web={"port": 0})) as (gateway, url, _chat),
        owner(gateway) as http,
    ):
        origin = {"Origin": url.rstrip("/")}
        async with http.post(url + "api/chat/messages", data=message_form("hi"), headers=origin):
            pass
        await gateway.wait_idle()
        async with http.get(url + "metrics") as response:
            assert response.headers["Content-Type"].startswith("text/plain")
            body = await response.text()
    lines = body.splitlines()
    assert 'switchboard_turn_duration_seconds_count{kind="chat"} 1.0' in lines
    assert 'switchboard_turns_total{kind="chat",outcome="done"} 1.0' in lines
    assert "switchboard_llm_call_duration_seconds_count 1.0" in lines
    assert any(
        line.startswith('switchboard_llm_tokens_total{kind="input"}') and not line.endswith(" 0.0")
        for line in lines
    )
    assert 'switchboard_queue_depth{queue="outbox"} 0.0' in lines
    assert 'switchboard_channel_connected{channel="webchat"} 1.0' in lines
    assert 'switchboard_errors_total{kind="llm"} 0.0' in lines


def test_schedule_is_shown_when_the_gateway_has_a_scheduler() -> None:
    def items() -> list[ScheduledItem]:
        return [
            ScheduledItem("job-1", "cron", "every day at 09:00", None, "telegram:1"),
            ScheduledItem(
                "heartbeat", "heartbeat", "every 30 min", datetime(2030, 1, 1, tzinfo=UTC)
            ),
        ]

    shown = schedule(SimpleNamespace(schedule=items))  # type: ignore[arg-type]
    assert shown["available"] is True
    assert [i["id"] for i in shown["items"]] == ["heartbeat", "job-1"]  # soonest first
    assert shown["items"][0]["next_run"] == datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    unscheduled = SimpleNamespace(schedule=lambda: None)
    assert schedule(unscheduled) == {"available": False, "items": []}  # type: ignore[arg-type]


def test_loading_settings_from_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SWITCHBOARD_WEB__HOST", "192.0.2.10")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == "web.token"
