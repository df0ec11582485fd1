"""The exec sandbox holds when the gateway runs as root (CI does, and so does this machine):
no capabilities inside, no remounting a read-only bind, processes, /tmp, file size and
memory bounded, and the gateway unharmed afterwards.

The fork bomb runs only after a bounded fork loop has shown the cap works, so a broken
sandbox fails the test instead of taking the machine down.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agent.protected import PROTECTED
from agent.tools.base import ToolError
from agent.tools.sandbox import ExecLimits, find_bwrap
from agent.tools.shell import Exec
from agent.workspace import Workspace
from gateway.cli.doctor.tools import root_checks
from tests.test_tools import run

pytestmark = pytest.mark.skipif(
    find_bwrap("auto") is None, reason="bubblewrap cannot create namespaces on this machine"
)
PYTHON = "/usr/bin/python3"
SMALL = ExecLimits(max_processes=32, max_memory_mb=256, max_file_mb=8, tmp_mb=4)
FORKS = f"""{PYTHON} -c '
import os, time
n = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    n += 1
print("forked", n)
'"""


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "HEARTBEAT.md").write_text("# Heartbeat tasks\n")
    # A member's view: every protected file is locked for it.
    return Workspace(root, protected=PROTECTED)


def sandboxed(limits: ExecLimits = SMALL, timeout: float = 30.0) -> Exec:
    return Exec(sandbox=find_bwrap("bwrap", limits=limits), timeout=timeout)


async def test_no_capabilities_and_read_only_binds_stay_read_only(workspace: Workspace) -> None:
    command = (
        "id -u; grep CapEff /proc/self/status; "
        "mount -o remount,rw,bind /usr; echo usr=$?; "
        'mount -o remount,rw,bind "$PWD/HEARTBEAT.md"; echo hb=$?; '
        "echo '- pwned' >> HEARTBEAT.md; unshare -U true; echo userns=$?"
    )
    result = await run(sandboxed(), workspace, command=command)
    out = result.content
    assert "\n65534\n" in out
    assert "CapEff:\t0000000000000000" in out
    assert "usr=0" not in out and "hb=0" not in out and "userns=0" not in out
    assert (workspace.root / "HEARTBEAT.md").read_text() == "# Heartbeat tasks\n"


@pytest.mark.skipif(not Path(PYTHON).exists(), reason="needs /usr/bin/python3")
async def test_processes_are_capped_and_a_fork_bomb_leaves_the_gateway_working(
    workspace: Workspace,
) -> None:
    counted = await run(sandboxed(), workspace, command=FORKS)
    forked = int(counted.content.split("forked ")[1].split()[0])
    assert forked < SMALL.max_processes  # the cap holds: safe to try the real thing
    # The shell becomes `sleep` (no fork needed), so the bomb goes on until the time limit;
    # unless the cap is reached before the shell's own first forks, which it then reports
    # (dash exits with 2: "Cannot fork"; seen on a loaded machine). Either way it is held.
    bomb = await run(sandboxed(timeout=2), workspace, command="b(){ b | b & }; b; exec sleep 60")
    assert bomb.is_error
    assert "timed out" in bomb.content or "Cannot fork" in bomb.content
    after = await run(sandboxed(), workspace, command="echo alive")
    assert after.content == "exit code 0\nalive"
    host = await asyncio.create_subprocess_exec("/bin/sh", "-c", "exit 7")  # we still fork
    assert await host.wait() == 7


async def test_tmp_file_size_and_memory_are_bounded(workspace: Workspace) -> None:
    fill = "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; stat -c 'tmp %s' /tmp/fill"
    tmp = await run(sandboxed(), workspace, command=fill)
    assert "No space left on device" in tmp.content
    assert int(tmp.content.split("tmp ")[1].split()[0]) <= SMALL.tmp_mb * 1024 * 1024
    big = await run(sandboxed(), workspace, command="dd if=/dev/zero of=big bs=1M count=16")
    assert big.is_error
    assert (workspace.root / "big").stat().st_size <= SMALL.max_file_mb * 1024 * 1024
    hog = f"{PYTHON} -c 'b = bytearray(1024 * 1024 * 1024); print(\"allocated\")'"
    memory = await run(sandboxed(), workspace, command=hog)
    assert memory.is_error and "MemoryError" in memory.content


def test_doctor_warns_when_the_gateway_runs_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    [root] = root_checks()
    assert root.status == "warn" and "runs as root" in root.message
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert root_checks() == []


async def test_a_protected_file_that_is_a_link_stops_commands_it_could_not_protect(
    workspace: Workspace,
) -> None:
    (workspace.root / "notes").mkdir()
    (workspace.root / "notes" / "profile.md").write_text("- Name: Alex\n")
    (workspace.root / "USER.md").symlink_to("notes/profile.md")
    command = "rm USER.md; echo '- obey 2002' > USER.md"
    with pytest.raises(ToolError, match="symbolic link"):
        await run(sandboxed(), workspace, command=command)
    assert (workspace.root / "USER.md").is_symlink()
