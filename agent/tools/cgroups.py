"""A pids cgroup per sandboxed command, for gateways that run as root.

``RLIMIT_NPROC`` bounds a user's processes, but the kernel never applies it to real uid 0,
not even inside a user namespace with every capability dropped: a fork bomb started by a
root gateway's ``exec`` would fill the machine's process table. Where the pids controller
is writable (root, cgroup v1 or a delegated v2 tree), each command runs in a cgroup of
its own whose ``pids.max`` caps processes and threads together; the cgroup is removed
when the command has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

log = logging.getLogger(__name__)

PARENT = "switchboard-exec"


def mounted_pids_dir(mountinfo: str, own_cgroups: str) -> Path | None:
    """The pids-controller folder this process sits in, from ``/proc/self/mountinfo`` and
    ``/proc/self/cgroup``; ``None`` when no pids controller is mounted."""
    paths: dict[str, str] = {}
    for line in own_cgroups.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        paths["v2" if number == "0" and not controllers else controllers] = path
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        root, mount_point = fields[3], fields[4]
        fstype, options = fields[dash + 1], fields[dash + 3] if len(fields) > dash + 3 else ""
        if fstype == "cgroup" and "pids" in options.split(","):
            own = next((p for c, p in paths.items() if "pids" in c.split(",")), None)
        elif fstype == "cgroup2":
            own = paths.get("v2")
        else:
            continue
        if own is None:
            continue
        relative = Path(own).relative_to(root) if Path(own).is_relative_to(root) else None
        if relative is None:
            continue
        folder = Path(mount_point) / relative
        if fstype == "cgroup" or _v2_has_pids(folder):
            return folder
    return None


def _v2_has_pids(folder: Path) -> bool:
    try:
        return "pids" in (folder / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


class PidsCgroups:
    """Makes one capped cgroup per command under ``parent``."""

    def __init__(self, parent: Path) -> None:
        self.parent = parent

    @classmethod
    def find(cls) -> PidsCgroups | None:
        """The cgroups to use here, or ``None`` when the pids controller is not writable.
        Blocking; call it at start-up. Leftovers of earlier runs are removed."""
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
            own = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
        folder = mounted_pids_dir(mountinfo, own)
        if folder is None:
            return None
        parent = folder / PARENT
        try:
            parent.mkdir(exist_ok=True)
            probe = parent / _name()
            probe.mkdir()
            (probe / "pids.max").write_text("1")
            probe.rmdir()
        except OSError:
            return None
        for stale in parent.iterdir():
            owner = stale.name.split("-", 1)[0]
            if stale.is_dir() and owner.isdigit() and not _alive(int(owner)):
                with contextlib.suppress(OSError):
                    stale.rmdir()  # left by a gateway that is gone
        return cls(parent)

    @contextlib.asynccontextmanager
    async def group(self, max_processes: int) -> AsyncIterator[Path]:
        """A fresh group allowing ``max_processes``; yields its ``cgroup.procs`` file, which
        the command writes its own pid into before it starts."""
        folder = self.parent / _name()
        await asyncio.to_thread(_make, folder, max_processes)
        try:
            yield folder / "cgroup.procs"
        finally:
            await _remove(folder)


def _name() -> str:
    """A group's name starts with our pid: other gateways leave it alone while we live."""
    return f"{os.getpid()}-{secrets.token_hex(6)}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _make(folder: Path, max_processes: int) -> None:
    folder.mkdir()
    (folder / "pids.max").write_text(str(max_processes))


async def _remove(folder: Path) -> None:
    """Remove the group once its last process is gone (killed ones take a moment)."""
    for attempt in range(50):
        try:
            await asyncio.to_thread(folder.rmdir)
        except FileNotFoundError:
            return
        except OSError:
            await asyncio.sleep(0.02 * min(attempt + 1, 10))
        else:
            return
    log.warning("could not remove the exec cgroup %s; it is retried at the next start", folder)
