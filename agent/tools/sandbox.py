"""An OS sandbox for ``exec``: bubblewrap (``bwrap``) namespaces around each command.

The deny list in :mod:`agent.tools.shell` reads the command text; a command can always be
written so that it does not match. The boundary is here instead: the command sees the
system's programs read-only, the workspace read-write, a private ``/tmp`` and nothing else
of the file system (no home directory, no data directory, no config, no SSH keys), runs in
its own user, PID, IPC and UTS namespaces, and without a network unless
``tools.exec.network`` says otherwise (then it shares the host's, local services included).

bubblewrap needs unprivileged user namespaces. ``sandbox = "auto"`` (the default) uses it
when it works and otherwise runs commands without it (``switchboard doctor`` warns);
``"bwrap"`` refuses to start without it; ``"off"`` never uses it.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# System directories a shell needs, read-only. A merged-/usr system has /bin -> usr/bin etc.:
# links are recreated as links, real directories are bound.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Only what programs need from /etc: no shadow, sudoers or ssh host keys.
ETC_ENTRIES = (
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/gitconfig",
    "/etc/mime.types",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
)


class SandboxUnavailable(Exception):
    """bubblewrap is missing or cannot create namespaces here (the message says which)."""


@dataclass(frozen=True, slots=True)
class Bwrap:
    """How to wrap one command; ``executable`` is the bwrap binary."""

    executable: str
    network: bool = False

    def argv(
        self,
        command: Sequence[str],
        workspace: Path,
        *,
        hidden: Sequence[Path] = (),
        read_only: Sequence[Path] = (),
        read_write: Sequence[Path] = (),
    ) -> list[str]:
        """``command`` wrapped; ``hidden`` paths inside what it sees (the gateway's own data
        directory and config, when a user puts the workspace around them) are covered by an
        empty directory or file. ``read_only`` and ``read_write`` are further paths it sees
        (an MCP server's program and data)."""
        resolved = workspace.resolve()
        root = str(resolved)
        args = [self.executable, "--unshare-all", "--die-with-parent", "--new-session"]
        if self.network:
            args.append("--share-net")
        for directory in SYSTEM_DIRS:
            path = Path(directory)
            if path.is_symlink():
                args += ["--symlink", str(path.readlink()), directory]
            elif path.is_dir():
                args += ["--ro-bind", directory, directory]
        for entry in ETC_ENTRIES:
            if Path(entry).exists():
                args += ["--ro-bind", entry, entry]
        private_tmp = "/tmp"  # noqa: S108 - an empty tmpfs of the sandbox's own
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", private_tmp]
        args += ["--bind", root, root]
        visible = [resolved]
        for flag, paths in (("--ro-bind", read_only), ("--bind", read_write)):
            for path in paths:
                extra = path.resolve()
                if extra.exists():
                    args += [flag, str(extra), str(extra)]
                    visible.append(extra)
        args += _covers(hidden, visible)
        return [*args, "--chdir", root, "--", *command]


def _covers(hidden: Sequence[Path], visible: Sequence[Path]) -> list[str]:
    """Arguments that cover each existing ``hidden`` path inside a ``visible`` one."""
    args: list[str] = []
    for path in hidden:
        target = path.resolve()
        if not any(target.is_relative_to(v) for v in visible) or not target.exists():
            continue
        if target.is_dir():
            args += ["--tmpfs", str(target)]
        else:
            args += ["--ro-bind", "/dev/null", str(target)]
    return args


def find_bwrap(mode: str, *, network: bool = False) -> Bwrap | None:
    """The sandbox to use for ``tools.exec.sandbox = mode`` ("auto", "bwrap" or "off").

    Raises :class:`SandboxUnavailable` when ``mode`` is "bwrap" and it cannot work here.
    Blocking (runs bwrap once to prove namespaces work): call it at start-up.
    """
    if mode == "off":
        return None
    try:
        return _working_bwrap(network)
    except SandboxUnavailable:
        if mode == "auto":
            return None
        raise


def unavailable_reason() -> str | None:
    """Why commands cannot be sandboxed here, or ``None`` when they can (for the doctor)."""
    try:
        _working_bwrap(network=False)
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def _working_bwrap(network: bool) -> Bwrap:
    executable = shutil.which("bwrap")
    if executable is None:
        raise SandboxUnavailable("bwrap is not installed (Debian/Ubuntu: apt install bubblewrap)")
    problem = _problem(executable)
    if problem is not None:
        raise SandboxUnavailable(problem)
    return Bwrap(executable, network)


@functools.cache
def _problem(executable: str) -> str | None:
    """Why this bwrap cannot sandbox here, or ``None``; asked once per process."""
    sandbox = Bwrap(executable)
    try:
        with tempfile.TemporaryDirectory() as workspace:
            probe = subprocess.run(
                sandbox.argv(["true"], Path(workspace)),
                capture_output=True,
                timeout=10,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if probe.returncode != 0:
        error = probe.stderr.decode(errors="replace").strip() or f"exit code {probe.returncode}"
        return (
            f"bwrap cannot create namespaces here ({error}); unprivileged user namespaces "
            "may be disabled (sysctl kernel.unprivileged_userns_clone) or blocked by a "
            "container's seccomp profile"
        )
    return None
