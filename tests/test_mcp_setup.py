"""MCP configuration, tool naming, find_tools, the sandbox, ``switchboard mcp`` and doctor."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent.llm.types import ToolSpec
from agent.mcp.client import McpClient, ServerDown
from agent.mcp.spec import HttpTarget, ServerSpec, StdioTarget
from agent.mcp.tools import schema_problem, tool_name
from agent.mcp.transports import Transports
from agent.tools.base import Tool, ToolContext, ToolResult
from agent.tools.find_tools import FindTools, rank
from agent.tools.registry import ToolRegistry
from gateway.cli import mcp as mcp_cli
from gateway.cli.doctor.tools import mcp_checks
from gateway.config.settings import Settings, load_settings
from gateway.core.errors import ConfigError
from gateway.core.system.logs import Redactor, secret_values
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM
from tests.fakes.mcp_fixtures import start_http_server, stdio
from tests.test_cli import cli_env, switchboard

# -- configuration --------------------------------------------------------------------------


def test_servers_come_from_config_toml_with_secret_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        """
[mcp.servers.calendar]
command = "uvx"
args = ["mcp-calendar"]
env = { CALENDAR_TOKEN = "cal-token-123456" }
tools = ["list_events", "add_event"]

[mcp.servers.wiki]
url = "https://wiki.example/mcp"
headers = { Authorization = "Bearer wiki-secret-abcdef" }
roles = ["owner", "admin", "member"]
"""
    )
    settings = load_settings(home=home)
    calendar, wiki = settings.mcp.servers["calendar"], settings.mcp.servers["wiki"]
    assert calendar.stdio and calendar.tools == ("list_events", "add_event")
    assert wiki.url == "https://wiki.example/mcp" and "member" in wiki.roles
    shown = repr(settings) + str(settings.model_dump())
    assert "cal-token-123456" not in shown and "wiki-secret-abcdef" not in shown
    # every configured secret is redacted from logs, traces and tool results
    redact = Redactor(secret_values(settings, environ={}))
    assert redact("token cal-token-123456 and Bearer wiki-secret-abcdef") == (
        "token [REDACTED] and [REDACTED]"
    )


def test_servers_come_from_the_environment_as_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = {"time": {"command": "uvx", "args": ["mcp-server-time"], "eager": True}}
    monkeypatch.setenv("SWITCHBOARD_MCP__SERVERS", json.dumps(servers))
    settings = load_settings(home=tmp_path / "home")
    assert settings.mcp.servers["time"].args == ("mcp-server-time",)
    assert settings.mcp.servers["time"].eager


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({}, "give either command"),
        ({"command": "x", "url": "https://a.example"}, "give either command"),
        ({"url": "ftp://a.example"}, "url must start with http"),
        ({"url": "https://a.example", "env": {"A": "b"}}, "a url server takes headers"),
        ({"command": "x", "roles": ["root"]}, "unknown role"),
        ({"command": "x", "agents": ["ghost"]}, "unknown agent"),
        ({"command": "x", "timeout": 5}, "unknown key; did you mean `timeout_seconds`?"),
    ],
)
def test_bad_server_settings_fail_at_start_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: dict[str, Any], message: str
) -> None:
    monkeypatch.setenv("SWITCHBOARD_MCP__SERVERS", json.dumps({"demo": server}))
    with pytest.raises(ConfigError) as caught:
        load_settings(home=tmp_path / "home")
    assert message in str(caught.value)
    assert "mcp" in str(caught.value)


@pytest.mark.parametrize("name", ["Demo", "a__b", "x_", "9lives", "a" * 33])
def test_server_names_must_make_clean_tool_prefixes(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="tools are named <server>__<tool>"):
        Settings(home=tmp_path, mcp={"servers": {name: {"command": "x"}}})


# -- tools ----------------------------------------------------------------------------------


def test_tool_names_fit_every_provider() -> None:
    assert tool_name("demo", "now") == "demo__now"
    assert tool_name("demo", "files.read-all") == "demo__files_read-all"
    long = tool_name("a-very-long-server-name", "an_extraordinarily_long_tool_name_" * 2)
    assert len(long) == 64 and long.startswith("a-very-long-server-name__an_extra")
    assert long != tool_name("a-very-long-server-name", "an_extraordinarily_long_tool_name_" * 3)


def test_schemas_are_checked_and_capped() -> None:
    assert schema_problem({"type": "object", "properties": {}}, 4_000) is None
    assert "not an object" in str(schema_problem({"type": "string"}, 4_000))
    assert "invalid" in str(schema_problem({"type": "object", "required": "x"}, 4_000))
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(300)}}
    assert "max_schema_chars" in str(schema_problem(big, 4_000))


def test_find_tools_ranks_by_name_description_and_arguments() -> None:
    specs = [
        ToolSpec("cal__add_event", "Add an event to the calendar.", {"properties": {"when": {}}}),
        ToolSpec("cal__list_events", "List the calendar's events.", {"properties": {}}),
        ToolSpec("ha__turn_on", "Switch a light or a plug on.", {"properties": {"entity": {}}}),
    ]
    assert [s.name for s in rank("switch on the kitchen light", specs)] == ["ha__turn_on"]
    assert rank("add events", specs)[0].name == "cal__add_event"
    assert rank("weather forecast", specs) == []


def _tool(name: str, source: str = "") -> Tool:
    class Sample(Tool):
        description = f"Does {name} things."
        parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

        async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            return ToolResult("ok")

    Sample.name = name
    Sample.source = source
    return Sample()


def test_past_the_budget_whole_servers_wait_behind_find_tools() -> None:
    tools = [
        _tool("read_file"),
        *(_tool(f"small__t{i}", "small") for i in range(3)),
        *(_tool(f"big__t{i}", "big") for i in range(5)),
        *(_tool(f"tiny__t{i}", "tiny") for i in range(2)),
    ]
    finder = FindTools(max_tools=6, max_tokens=10_000)
    registry = ToolRegistry([*tools, finder])
    offered, deferred = finder.split(registry.specs(), registry)
    names = [spec.name for spec in offered]
    # small (3) fits, big (5) would pass 6 and waits, tiny (2) still fits
    assert names[:6] == ["read_file", "small__t0", "small__t1", "small__t2", "tiny__t0", "tiny__t1"]
    assert names[-1] == "find_tools" and "big" in offered[-1].description
    assert sorted(deferred) == [f"big__t{i}" for i in range(5)]
    # within the budget nothing waits and find_tools is not offered
    roomy = FindTools(max_tools=20)
    offered, deferred = roomy.split(ToolRegistry([*tools, roomy]).specs(), registry)
    assert deferred == {} and "find_tools" not in [s.name for s in offered]


# -- the sandbox and the environment --------------------------------------------------------


def test_a_stdio_server_gets_a_minimal_environment(tmp_path: Path) -> None:
    target = StdioTarget("srv", env={"API_TOKEN": _secret("tok-123456")}, cwd=tmp_path)
    from agent.mcp.transports import server_environment

    env = server_environment(target, sandboxed=True)
    assert env == {"LANG": env["LANG"], "HOME": str(tmp_path), "API_TOKEN": "tok-123456"}


def _secret(value: str) -> Any:
    from pydantic import SecretStr

    return SecretStr(value)


async def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    spec = ServerSpec(
        "broken",
        StdioTarget(
            sys.executable, ("-c", "import sys; sys.exit('no calendar configured')"), cwd=tmp_path
        ),
    )
    client = McpClient(spec, Transports(log_dir=tmp_path / "logs"))
    with pytest.raises(ServerDown, match="no calendar configured"):
        await client.ready()
    with pytest.raises(ServerDown, match="next attempt in"):  # no waiting while it is down
        await client.call("anything", {})
    await client.stop()


async def test_a_server_that_only_speaks_sse(tmp_path: Path) -> None:
    process, url = await start_http_server("--sse")
    try:
        spec = ServerSpec("old", HttpTarget(f"{url}/sse", transport="sse"))
        client = McpClient(spec, Transports(log_dir=tmp_path))
        result = await client.call("now", {"zone": "UTC"})
        await client.stop()
    finally:
        process.kill()
        await process.wait()
    assert result.content[0].text == "It is 2030-01-02 03:04 in UTC."  # type: ignore[union-attr]


# -- switchboard mcp, doctor ----------------------------------------------------------------


def mcp_env(home: Path, fake_llm: FakeLLM, servers: dict[str, Any]) -> dict[str, str]:
    return cli_env(home, fake_llm, SWITCHBOARD_MCP__SERVERS=json.dumps(servers))


async def test_mcp_list_shows_servers_state_and_tools(
    tmp_path: Path, fake_llm: FakeLLM, shared: dict[str, Any]
) -> None:
    servers = {
        "demo": {"url": shared["url"], "tools": ["now", "add_event"]},
        "broken": {"command": "/nonexistent/server", "sandbox": False},
        "off": stdio(enabled=False),
    }
    code, out, _ = await switchboard("mcp", "list", env=mcp_env(tmp_path / "h", fake_llm, servers))
    assert code == 1  # one server does not work
    assert "demo__now  (read-only)" in out and "demo__add_event  (side effect)" in out
    assert "left out: hidden (not on the server's tools allowlist)" in out
    assert "broken  stdio  /nonexistent/server" in out
    assert "FAILED: program not found: /nonexistent/server" in out
    assert "off  disabled" in out
    assert "2 MCP tool(s)" in out


async def test_mcp_test_connects_to_one_server(
    make_settings: SettingsFactory, shared: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(mcp={"servers": {"demo": {"url": shared["url"]}}})
    assert await mcp_cli.run(settings, Namespace(action="test", name="demo")) == 0
    out = capsys.readouterr().out
    assert "instructions: A demo server for Switchboard's tests." in out
    assert "demo__environment  (read-only)" in out and "demo__crash  (side effect)" in out
    assert await mcp_cli.run(settings, Namespace(action="test", name="nope")) == 1  # not 2:
    assert "no MCP server 'nope' (configured: demo)" in capsys.readouterr().err  # the config's


async def test_a_sandboxed_server_whose_program_is_missing_is_said_so(
    make_settings: SettingsFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "the server exited before it answered; it said: prlimit: failed to execute
    /nonexistent/server: ...", naming the sandbox's helper instead of the program."""
    settings = make_settings(mcp={"servers": {"broken": {"command": "/nonexistent/server"}}})
    assert await mcp_cli.run(settings, Namespace(action="test", name="broken")) == 1
    out = capsys.readouterr().out
    assert "FAILED: program not found: /nonexistent/server" in out
    assert "prlimit" not in out


async def test_doctor_checks_every_enabled_server(
    make_settings: SettingsFactory, shared: dict[str, Any]
) -> None:
    servers = {
        "demo": {"url": shared["url"], "roles": ["owner", "member"]},
        "broken": {"url": "http://127.0.0.1:9/mcp"},
        "off": {"command": "/nonexistent", "enabled": False},
    }
    settings = make_settings(
        mcp={"servers": servers, "max_tools_per_server": 5, "max_offered_tools": 3}
    )
    checks = await mcp_checks(settings)
    found = {(c.name, c.status): c.message for c in checks}
    assert "cannot start or reach it" in found["mcp broken", "fail"]
    assert found["mcp demo", "ok"].startswith("5 tool(s), 4 read-only")
    warnings = [c.message for c in checks if c.status == "warn"]
    assert any(
        "6 tool(s) left out: read_text (more than max_tools_per_server" in w for w in warnings
    )
    assert any("members may use its tools" in w for w in warnings)
    assert "more than the prompt budget" in found["mcp tools", "ok"]
    assert not any(c.name == "mcp off" for c in checks)
