"""exec in the bubblewrap sandbox: the workspace and the system's programs, nothing else.

The deny list reads command text and can be talked around; these tests write commands that
the deny list lets through and show the sandbox still holds: files outside the workspace
are not there, the network is not there, and a timed-out command dies with its namespace.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from agent.tools.base import Tool
from agent.tools.sandbox import find_bwrap
from agent.tools.shell import Exec
from agent.toolset import default_tools
from agent.workspace import Workspace
from gateway.cli.doctor.tools import sandbox_checks
from gateway.core.errors import ConfigError
from gateway.core.system.portguard import PortGuard
from tests.conftest import SettingsFactory
from tests.system import missing
from tests.test_tools import run

pytestmark = pytest.mark.skipif(
    find_bwrap("auto") is None,
    reason=f"bubblewrap is not installed {missing('bubblewrap')}"
    if shutil.which("bwrap") is None
    else "bubblewrap cannot create namespaces on this machine",
)
PYTHON = "/usr/bin/python3"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    return Workspace(root)


def sandboxed(*, network: bool = False, timeout: float = 30.0) -> Exec:
    guard = PortGuard(lambda: ()) if network else None
    return Exec(sandbox=find_bwrap("bwrap", network=network, guard=guard), timeout=timeout)


def exec_tool(tools: list[Tool]) -> Tool:
    return next(t for t in tools if t.name == "exec")


async def test_only_the_workspace_is_visible_and_writable(workspace: Workspace) -> None:
    outside = workspace.root.parent / "secret.txt"
    result = await run(
        sandboxed(),
        workspace,
        command=f"cat notes.txt; echo new > made.txt; cat {outside}; ls /root; ls /etc/shadow",
    )
    assert result.content.startswith("exit code ") and "mine" in result.content
    assert (workspace.root / "made.txt").read_text() == "new\n"
    assert "TOP SECRET" not in result.content and "No such file" in result.content
    assert outside.read_text() == "TOP SECRET"


async def test_the_gateways_default_exec_is_sandboxed(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings()
    canary = settings.data_dir / "canary.txt"
    canary.parent.mkdir(parents=True, exist_ok=True)
    canary.write_text("gateway state")
    tool = exec_tool(default_tools(settings))
    # The deny list refuses commands naming the data directory; a glob gets past it.
    command = f"cat {settings.home}/d*/canary.txt; echo done"
    result = await run(tool, Workspace(settings.workspace_dir), command=command)
    assert "done" in result.content and "gateway state" not in result.content


@pytest.mark.skipif(not Path(PYTHON).exists(), reason="needs /usr/bin/python3")
async def test_no_network_unless_configured(workspace: Workspace) -> None:
    connected = asyncio.Event()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    dial = f"{PYTHON} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3)\""
    async with server:
        offline = await run(sandboxed(), workspace, command=dial)
        assert offline.is_error and not connected.is_set()
        online = await run(sandboxed(network=True), workspace, command=dial)
        if not PortGuard(lambda: ()).available:  # a networked sandbox is refused here
            assert online.is_error and "refused here" in online.content
            return
        assert not online.is_error, online.content
        await asyncio.wait_for(connected.wait(), 5)


async def test_a_timed_out_command_dies_with_its_sandbox(workspace: Workspace) -> None:
    started = time.monotonic()
    result = await run(sandboxed(timeout=0.5), workspace, command="sleep 31.4159 & sleep 31.4159")
    assert result.is_error and "timed out" in result.content
    assert time.monotonic() - started < 10

    def sleepers() -> list[str]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if b"31.4159" in (entry / "cmdline").read_bytes():
                    found.append(entry.name)
            except OSError:
                continue
        return found

    deadline = time.monotonic() + 5
    while sleepers() and time.monotonic() < deadline:  # noqa: ASYNC110 - polling /proc, no event exists
        await asyncio.sleep(0.02)
    assert sleepers() == []


def test_a_required_sandbox_that_is_missing_stops_the_start(
    make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = make_settings(tools={"exec": {"sandbox": "bwrap"}})
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    assert shutil.which("bwrap") is None
    with pytest.raises(ConfigError, match=r"tools\.exec\.sandbox.*not installed"):
        default_tools(settings)


async def test_sandbox_off_runs_commands_on_the_host(
    make_settings: SettingsFactory, workspace: Workspace
) -> None:
    tool = exec_tool(default_tools(make_settings(tools={"exec": {"sandbox": "off"}})))
    outside = workspace.root.parent / "secret.txt"
    result = await run(tool, workspace, command=f"cat {outside}")
    assert "TOP SECRET" in result.content


def test_doctor_tells_whether_commands_are_sandboxed(
    make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    [ok] = sandbox_checks(make_settings())
    assert ok.status == "ok" and "without network" in ok.message
    monkeypatch.setenv("PATH", str(tmp_path))
    [warn] = sandbox_checks(make_settings())
    assert warn.status == "warn" and "commands run unsandboxed" in warn.message
    monkeypatch.setenv("container", "podman")  # what Podman sets; Docker has /.dockerenv
    [warn] = sandbox_checks(make_settings())
    assert "commands run unsandboxed in this container" in warn.message
    assert "--security-opt seccomp=unconfined" in warn.message
    [fail] = sandbox_checks(make_settings(tools={"exec": {"sandbox": "bwrap"}}))
    assert fail.status == "fail" and "refuses to start" in fail.message
    assert sandbox_checks(make_settings(tools={"exec": {"enabled": False}})) == []


async def test_gateway_state_inside_the_workspace_is_covered(
    make_settings: SettingsFactory, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    settings = make_settings(home=home, workspace=home)  # a workspace around everything
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "canary.txt").write_text("gateway state")
    settings.config_file.write_text('[telegram]\ntoken = "123:canary-token"\n')
    tool = exec_tool(default_tools(settings))
    result = await run(tool, Workspace(home), command="cat d*/canary.txt c*.toml; ls; echo done")
    assert "done" in result.content
    assert "gateway state" not in result.content and "canary-token" not in result.content
    assert "canary" in settings.config_file.read_text()  # covered, not changed
