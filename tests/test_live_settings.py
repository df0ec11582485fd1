"""Every setting a running gateway can apply, it applies at once, through one path
(gateway/runtime/live/apply.py): the model (the next turn's request names it, a running
turn ends on its own), a channel's settings and a channel turned on, the MCP servers (only
the changed one restarted), the heartbeat; a change that would not start changes nothing
and names the field. These change the settings as the settings page does
(``Gateway.change_settings``, the form's text per dotted key) on gateways whose settings
come from a config.toml, as ``switchboard run`` loads them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import tomlkit

from agent.mcp.client import ServerState
from channels.memory import MemoryChannel
from gateway.config.settings import load_settings
from gateway.config.toml.config_file import UNSET
from gateway.core.channel import Channel
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Step, text
from tests.fakes.mcp_fixtures import stdio
from tests.fakes.telegram import FakeTelegram


def write_home(home: Path, fake: FakeLLM, **tables: Any) -> Path:
    """A home whose config.toml names the fake model server, and ``tables`` besides."""
    home.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "llm": {
            "base_url": fake.openai_url,
            "model": "fake-model",
            "api_key": "sk-live-test-1234",
            "max_retries": 0,
        },
        "agent": {"reflection": False},
        "heartbeat": {"enabled": False},
        "web": {"enabled": False},
    }
    for name, table in tables.items():
        config[name] = {**config.get(name, {}), **table}
    path = home / "config.toml"
    path.write_text(tomlkit.dumps(config))
    return path


@asynccontextmanager
async def running(
    home: Path, fake: FakeLLM, *channels: Channel, **tables: Any
) -> AsyncIterator[Gateway]:
    """A started gateway of that home: with ``channels``, or (none given) the channels its
    settings configure, as `switchboard run` builds them."""
    write_home(home, fake, **tables)
    async with Gateway(load_settings(home=home), channels=list(channels) or None) as gateway:
        yield gateway


def model_of(request: Any) -> str:
    return str(request.body["model"])


async def test_a_new_model_answers_the_next_turn_and_a_running_turn_ends_on_its_own(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    channel = MemoryChannel()
    gate = asyncio.Event()
    async with running(tmp_path / "home", fake_llm, channel) as gateway:
        pid_agent = gateway.agent
        fake_llm.queue(Step(calls=(("memory_read", "{}"),), gate=gate), text("first"))
        await channel.push("read your memory")
        await fake_llm.wait_for_requests(1)  # the turn waits for its model's first answer
        change = await gateway.change_settings({"llm.model": "fake-model-2"}, by="test")
        gate.set()
        await channel.wait_for(1)
        fake_llm.queue(text("second"))
        await channel.push("and now?")
        await channel.wait_for(2)
    assert change.errors == {} and change.saved
    assert change.applied == ("llm.model",) and change.restart == ()
    assert [model_of(r) for r in fake_llm.requests] == ["fake-model", "fake-model", "fake-model-2"]
    assert gateway.agent is not pid_agent  # built again, in the same process
    assert 'model = "fake-model-2"' in (tmp_path / "home" / "config.toml").read_text()


async def test_a_price_set_while_running_prices_the_next_turn(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """[llm.prices] applies at once, as the settings page says: the running agents' model
    calls are priced from the next one on, so the money caps count them (before, only
    after a restart)."""
    channel = MemoryChannel()
    home = tmp_path / "home"
    async with running(home, fake_llm, channel) as gateway:
        await channel.push("before the price")
        await channel.wait_for(1)
        price = json.dumps({"fake-model": {"input": 1000, "output": 2000}})
        change = await gateway.change_settings({"llm.prices": price}, by="test")
        await channel.push("after the price")
        await channel.wait_for(2)
        await gateway.wait_idle()
    assert change.errors == {} and "llm.prices" in change.applied
    with sqlite3.connect(home / "data" / "switchboard.db") as db:
        costs = [row[0] for row in db.execute("SELECT cost_usd FROM usage")]
    unpriced, priced = sorted(costs, key=lambda cost: cost is not None)
    assert unpriced is None and priced is not None and priced > 0, costs  # the second turn


async def test_another_model_server_and_its_key_take_the_next_turn(
    tmp_path: Path, fake_llm: FakeLLM, backup_llm: FakeLLM
) -> None:
    channel = MemoryChannel()
    async with running(tmp_path / "home", fake_llm, channel) as gateway:
        await channel.push("hello")
        await channel.wait_for(1)
        change = await gateway.change_settings(
            {
                "llm.base_url": backup_llm.openai_url,
                "llm.api_key": "sk-other-key-5678",
                "llm.fallbacks": f'[{{"model": "spare", "base_url": "{fake_llm.openai_url}"}}]',
            },
            by="test",
        )
        await channel.push("hello again")
        await channel.wait_for(2)
        states = [s.name for s in gateway.model_states()]
    assert change.errors == {}
    assert set(change.applied) == {"llm.base_url", "llm.api_key", "llm.fallbacks"}
    assert len(fake_llm.requests) == 1 and len(backup_llm.requests) == 1
    assert backup_llm.requests[0].headers["Authorization"] == "Bearer sk-other-key-5678"
    assert states == ["fake-model (openai)", "spare (openai)"]  # the old model no longer listed


async def test_an_invalid_value_changes_nothing_and_names_the_field(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    channel = MemoryChannel()
    async with running(tmp_path / "home", fake_llm, channel) as gateway:
        config = tmp_path / "home" / "config.toml"
        before = config.read_bytes()
        out_of_range = await gateway.change_settings(
            {"llm.model": "other", "llm.max_tokens": "5"}, by="test"
        )
        not_a_number = await gateway.change_settings({"llm.context_window": "lots"}, by="test")
        unknown = await gateway.change_settings({"llm.modle": "x"}, by="test")
        # valid alone, but the gateway would not start with it: the plug-in refuses it
        inbox_only = await gateway.change_settings(
            {"email.imap_host": "127.0.0.1", "email.imap_username": "me"}, by="test"
        )
        after = config.read_bytes()
        await channel.push("hello")
        await channel.wait_for(1)
        running_settings = gateway.settings
    assert set(out_of_range.errors) == {"llm.max_tokens"} and not out_of_range.saved
    # told beside the key: neither the key again nor the page as who set it
    assert out_of_range.errors["llm.max_tokens"] == "Input should be greater than or equal to 64"
    assert set(not_a_number.errors) == {"llm.context_window"}
    assert "valid integer" in not_a_number.errors["llm.context_window"]
    assert "unknown key" in unknown.errors["llm.modle"]
    assert list(inbox_only.errors) == [""] and "email.smtp_host" in inbox_only.errors[""]
    assert after == before  # nothing written
    assert model_of(fake_llm.requests[0]) == "fake-model"  # nothing applied
    assert running_settings.email.imap_host is None


async def test_check_says_what_needs_a_restart_and_changes_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running(tmp_path / "home", fake_llm, MemoryChannel()) as gateway:
        before = (tmp_path / "home" / "config.toml").read_bytes()
        check = await gateway.change_settings(
            {"llm.model": "other", "storage.retention_days": "10"}, by="test", check=True
        )
        after = (tmp_path / "home" / "config.toml").read_bytes()
        model = gateway.settings.llm.model
    assert not check.saved and check.errors == {}
    assert check.applied == ("llm.model",) and check.restart == ("storage.retention_days",)
    assert after == before and model == "fake-model"


async def test_a_channels_access_rules_apply_to_its_next_message(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    telegram = {
        "token": tg.token,
        "base_url": tg.base_url,
        "poll_timeout_seconds": 1,
        "dm_policy": "allowlist",
        "allow_from": ["7"],
    }
    async with running(tmp_path / "home", fake_llm, telegram=telegram) as gateway:
        refused = await tg.say("hello?", chat_id=42, user_id=42)
        await tg.wait_confirmed(refused["update_id"] + 1)  # taken, and refused
        started = gateway.channels["telegram"]
        change = await gateway.change_settings({"telegram.allow_from": "7, 42"}, by="test")
        await tg.say("hello!", chat_id=42, user_id=42)
        [answer] = await tg.wait_sent(1, chat_id=42)
    assert change.applied == ("telegram.allow_from",) and change.restart == ()
    assert gateway.channels.get("telegram") is not started  # restarted alone, with its section
    assert [r.user_texts for r in fake_llm.requests] == [["hello!"]]
    assert answer.params["text"] == "echo: hello!"


async def test_a_channel_turned_on_while_running_starts_and_one_turned_off_stops(
    tmp_path: Path, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with running(tmp_path / "home", fake_llm) as gateway:
        assert "telegram" not in gateway.channels
        change = await gateway.change_settings(
            {
                "telegram.base_url": tg.base_url,
                "telegram.poll_timeout_seconds": "1",
                "telegram.dm_policy": "open",
                "telegram.token": tg.token,
            },
            by="test",
        )
        await tg.say("are you there?", chat_id=5, user_id=5)
        [answer] = await tg.wait_sent(1, chat_id=5)
        report = await gateway.config_reload.change({"telegram.token": UNSET}, by="test")
        still = set(gateway.channels)
    assert change.errors == {} and "telegram.token" in change.applied
    assert answer.params["text"] == "echo: are you there?"
    assert "telegram.token" in report.applied and "telegram" not in still


async def test_a_changed_mcp_server_is_restarted_alone(tmp_path: Path, fake_llm: FakeLLM) -> None:
    shown = {"roles": ["owner", "admin", "member"], "tools": ["now"], "eager": True}
    servers = {"first": stdio(**shown), "second": stdio(**shown)}
    channel = MemoryChannel()
    async with running(tmp_path / "home", fake_llm, channel, mcp={"servers": servers}) as gateway:
        assert gateway.mcp is not None
        first, second = gateway.mcp.clients["first"], gateway.mcp.clients["second"]
        async with asyncio.timeout(30):
            await first.wait_for_state(ServerState.READY)
            await second.wait_for_state(ServerState.READY)
        changed = {**servers, "second": stdio(**shown, timeout_seconds=45)}
        change = await gateway.change_settings({"mcp.servers": json.dumps(changed)}, by="test")
        assert gateway.mcp is not None
        now_first, now_second = gateway.mcp.clients["first"], gateway.mcp.clients["second"]
        async with asyncio.timeout(30):
            await now_second.wait_for_state(ServerState.READY)
        await channel.push("what tools do you have?")
        await channel.wait_for(1)
        first_state = first.state
    assert change.applied == ("mcp.servers.second.timeout_seconds",)
    assert now_first is first and first_state is ServerState.READY and first.restarts == 0
    assert now_second is not second and second.state is ServerState.STOPPED
    assert now_second.spec.timeout == 45
    offered = fake_llm.requests[-1].tool_names
    assert "first__now" in offered and "second__now" in offered


async def test_the_heartbeat_is_turned_on_and_its_interval_changed_while_running(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running(tmp_path / "home", fake_llm, MemoryChannel()) as gateway:
        before = gateway.schedule() or []
        on = await gateway.change_settings(
            {"heartbeat.enabled": "true", "heartbeat.interval_seconds": "600"}, by="test"
        )
        beating = gateway.schedule() or []
        await gateway.change_settings({"heartbeat.enabled": "off"}, by="test")
        after = gateway.schedule() or []
    assert [i.id for i in before] == []
    assert on.applied == ("heartbeat.enabled", "heartbeat.interval_seconds")
    assert [(i.id, i.description) for i in beating] == [("heartbeat", "every 10 minutes")]
    assert [i.id for i in after] == []


async def test_who_changed_which_keys_is_in_the_audit_log_without_the_values(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running(tmp_path / "home", fake_llm, MemoryChannel()) as gateway:
        await gateway.change_settings(
            {"llm.model": "fake-model-2", "llm.api_key": "sk-secret-9876"}, by="web:owner"
        )
        entries = await gateway.store.audit.recent(10, kind="settings_changed")
    [entry] = [e for e in entries if e.kind == "settings_changed"]
    assert entry.detail["by"] == "web:owner"
    assert entry.detail["keys"] == ["llm.api_key", "llm.model"]
    assert "sk-secret-9876" not in str(entry.detail)


async def test_tools_and_policy_change_for_the_next_turn(tmp_path: Path, fake_llm: FakeLLM) -> None:
    channel = MemoryChannel()
    async with running(tmp_path / "home", fake_llm, channel) as gateway:
        await channel.push("hello")
        await channel.wait_for(1)
        change = await gateway.change_settings(
            {"tools.exec.enabled": "false", "tools.web.enabled": "false"}, by="test"
        )
        await channel.push("hello again")
        await channel.wait_for(2)
    before, after = (set(r.tool_names) for r in fake_llm.requests)
    assert change.applied == ("tools.exec.enabled", "tools.web.enabled")
    assert {"exec", "web_fetch"} <= before and not {"exec", "web_fetch"} & after
