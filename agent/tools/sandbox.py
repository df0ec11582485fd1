"""An OS sandbox for ``exec``: bubblewrap (``bwrap``) namespaces around each command.

The deny list in :mod:`agent.tools.shell` reads the command text; a command can always be
written so that it does not match. The boundary is here instead: the command sees the
system's programs read-only, the workspace read-write (except what the turn may not
write: protected files, and what is hidden from it), a private size-capped ``/tmp`` and
nothing else of the file system (no home directory, no data directory, no config, no SSH
keys), runs in its own user, PID, IPC and UTS namespaces, and without a network unless
``tools.exec.network`` says otherwise (then it shares the host's, local services included).

Inside, the command is user ``nobody`` (65534) with no capabilities at all, cannot make
user namespaces of its own, and runs under limits on processes, memory per process and
file size. That matters most when the gateway runs as root: without ``--cap-drop ALL`` the
namespace's root keeps real root's capabilities (``mount -o remount,rw`` of a read-only
bind would work). A root gateway's processes are counted by a pids cgroup instead
(:mod:`agent.tools.cgroups`), because the kernel exempts uid 0 from ``RLIMIT_NPROC``.

bubblewrap needs unprivileged user namespaces. ``sandbox = "auto"`` (the default) uses it
when it works and otherwise runs commands without it (``switchboard doctor`` warns);
``"bwrap"`` refuses to start without it; ``"off"`` never uses it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.tools.cgroups import PidsCgroups
from agent.workspace import Locked
from gateway.core.system.portguard import NetworkUnguarded, PortGuard

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


NOBODY = "65534"
PRLIMIT = "/usr/bin/prlimit"  # util-linux; sets the limits inside the namespace
MB = 1024 * 1024
OPTIONAL_FEATURES = frozenset({"--disable-userns", "--size"})


class SandboxUnavailable(Exception):
    """bubblewrap is missing or cannot create namespaces here (the message says which)."""


class CannotLock(Exception):
    """A path the turn may not write cannot be kept read-only (the message says why)."""


@dataclass(frozen=True, slots=True)
class ExecLimits:
    """What one sandboxed command may use (``[tools.exec]``)."""

    max_processes: int = 256  # processes and threads
    max_memory_mb: int = 2048  # address space per process
    max_file_mb: int = 1024  # the largest file it may write
    tmp_mb: int = 256  # the private /tmp (memory-backed)


@dataclass(frozen=True, slots=True)
class Bwrap:
    """How to wrap one command; ``executable`` is the bwrap binary. ``pids`` counts the
    processes of a root gateway's commands (see the module docstring)."""

    executable: str
    network: bool = False
    limits: ExecLimits = field(default_factory=ExecLimits)
    pids: PidsCgroups | None = None
    # With a network: the gateway's own ports stay out of reach (gateway.core.system.portguard).
    guard: PortGuard | None = None
    # Options of newer bubblewraps (0.8): used when this one has them.
    features: frozenset[str] = OPTIONAL_FEATURES

    def argv(
        self,
        command: Sequence[str],
        workspace: Path,
        *,
        hidden: Sequence[Path] = (),
        read_only: Sequence[Locked] = (),
        extra_read_only: Sequence[Path] = (),
        read_write: Sequence[Path] = (),
        covered: Sequence[Path] = (),
        uncovered: Sequence[Path] = (),
        cgroup_procs: Path | None = None,
    ) -> list[str]:
        """``command`` wrapped; ``hidden`` paths inside what it sees (the gateway's own data
        directory and config, when a user puts the workspace around them) are covered by an
        empty directory or file; ``read_only`` paths are bound read-only (created empty
        first when missing, so the command cannot create them either). ``extra_read_only``
        and ``read_write`` are further paths outside the workspace it sees (an MCP server's
        program and data). ``covered`` paths in the workspace (what the conversation may
        not see) are covered by an empty read-only folder or file, and ``uncovered`` ones
        under them (what it may read after all) are bound read-only over the cover. With a network, bwrap starts under the ``guard`` (:class:`NetworkUnguarded` where it cannot work). With ``cgroup_procs`` the command first joins that cgroup."""
        resolved = workspace.resolve()
        root = str(resolved)
        args = [self.executable, "--unshare-all", "--unshare-user"]
        if "--disable-userns" in self.features:
            args.append("--disable-userns")  # no namespace of its own to regain capabilities
        args += ["--uid", NOBODY, "--gid", NOBODY, "--cap-drop", "ALL"]
        args += ["--die-with-parent", "--new-session"]
        if self.network:
            args.append("--share-net")
        args += _system_binds()
        private_tmp = "/tmp"  # noqa: S108 - an empty tmpfs of the sandbox's own
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += [*self._size(self.limits.tmp_mb * MB), "--tmpfs", private_tmp]
        whole = any(locked.path.resolve() == resolved for locked in read_only)
        args += ["--ro-bind" if whole else "--bind", root, root]
        if not whole:
            args += _read_only_binds(read_only, resolved)
        visible = [resolved]
        for flag, paths in (("--ro-bind", extra_read_only), ("--bind", read_write)):
            for path in paths:
                extra = path.resolve()
                if extra.exists():
                    args += [flag, str(extra), str(extra)]
                    visible.append(extra)
        args += self._conversation_view(covered, uncovered)
        args += self._covers(hidden, visible, skip=covered)
        args += ["--chdir", root, "--", *self._limited(command)]
        if self.network:
            if self.guard is None:
                raise NetworkUnguarded("a sandbox with a network needs the network guard")
            args = self.guard.wrap(args)  # raises NetworkUnguarded where it cannot work
        if cgroup_procs is None:
            return args
        # The shell joins the cgroup, then becomes bwrap: nothing runs outside the cap.
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup_procs), *args]

    def _conversation_view(self, covered: Sequence[Path], uncovered: Sequence[Path]) -> list[str]:
        """Cover what the conversation may not see, show again what it may read under it,
        then make the covers read-only (mount points are made in them first)."""
        folders = [p.resolve() for p in covered if p.is_dir()]
        args: list[str] = []
        for folder in folders:
            args += [*self._size(64 * 1024), "--tmpfs", str(folder)]
        for path in covered:
            if path.exists() and not path.is_dir():
                args += ["--ro-bind", "/dev/null", str(path.resolve())]
        for path in uncovered:
            real = path.resolve()
            if real.exists() and any(real.is_relative_to(f) for f in folders):
                args += ["--ro-bind", str(real), str(real)]
        for folder in folders:
            args += ["--remount-ro", str(folder)]
        return args

    def _covers(
        self, hidden: Sequence[Path], visible: Sequence[Path], *, skip: Sequence[Path] = ()
    ) -> list[str]:
        """Arguments that cover each existing ``hidden`` path inside a ``visible`` one (and
        not inside a ``skip`` path, covered already)."""
        args: list[str] = []
        skipped = [p.resolve() for p in skip]
        for path in hidden:
            target = path.resolve()
            if not any(target.is_relative_to(v) for v in visible) or not target.exists():
                continue
            if any(target.is_relative_to(s) for s in skipped):
                continue
            if target.is_dir():
                args += [*self._size(4096), "--tmpfs", str(target), "--remount-ro", str(target)]
            else:
                args += ["--ro-bind", "/dev/null", str(target)]
        return args

    def _size(self, size: int) -> list[str]:
        return ["--size", str(size)] if "--size" in self.features else []

    def _limited(self, command: Sequence[str]) -> list[str]:
        """``command`` under rlimits set inside the namespace, where ``RLIMIT_NPROC``
        counts only this command's processes (its user there is new)."""
        limits = self.limits
        return [
            PRLIMIT,
            f"--nproc={limits.max_processes}",
            f"--as={limits.max_memory_mb * MB}",
            f"--fsize={limits.max_file_mb * MB}",
            "--",
            *command,
        ]


def _system_binds() -> list[str]:
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            args += ["--symlink", str(path.readlink()), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    for entry in ETC_ENTRIES:
        if Path(entry).exists():
            args += ["--ro-bind", entry, entry]
    return args


def _read_only_binds(read_only: Sequence[Locked], root: Path) -> list[str]:
    args: list[str] = []
    for locked in read_only:
        if locked.path.is_symlink():
            # A bind covers the link's target, but the link itself could be replaced.
            if locked.strict:
                raise CannotLock(
                    f"{locked.path.name} is a symbolic link, which the sandbox cannot keep "
                    "read-only, so commands are refused in this conversation; the owner can "
                    "replace the link with the file itself"
                )
            continue
        path = Path(os.path.realpath(locked.path))
        if not path.is_relative_to(root) or path == root:
            continue
        if not os.path.lexists(path):
            _create_empty(path, directory=locked.directory)
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _create_empty(path: Path, *, directory: bool) -> None:
    """A mount point for a protected path that does not exist yet (an empty file or folder
    means nothing to the gateway: no heartbeat tasks, no profile)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if directory:
            path.mkdir()
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
    except FileExistsError:
        pass


def find_bwrap(
    mode: str,
    *,
    network: bool = False,
    limits: ExecLimits | None = None,
    guard: PortGuard | None = None,
) -> Bwrap | None:
    """The sandbox to use for ``tools.exec.sandbox = mode`` ("auto", "bwrap" or "off").

    Raises :class:`SandboxUnavailable` when ``mode`` is "bwrap" and it cannot work here.
    Blocking (runs bwrap once to prove namespaces work): call it at start-up.
    """
    if mode == "off":
        return None
    try:
        sandbox = _working_bwrap(network)
    except SandboxUnavailable:
        if mode == "auto":
            return None
        raise
    pids = PidsCgroups.find() if os.geteuid() == 0 else None
    return Bwrap(sandbox.executable, network, limits or ExecLimits(), pids, guard, sandbox.features)


def contains_fork_bombs() -> bool:
    """Whether a sandboxed command's processes are capped here: always for a non-root
    gateway (``RLIMIT_NPROC``), for root only with a writable pids cgroup."""
    return os.geteuid() != 0 or PidsCgroups.find() is not None


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
    if not Path(PRLIMIT).exists():
        raise SandboxUnavailable(f"{PRLIMIT} is missing (Debian/Ubuntu: apt install util-linux)")
    features = _features(executable)
    problem = _problem(executable, features)
    if problem is not None:
        raise SandboxUnavailable(problem)
    return Bwrap(executable, network, features=features)


@functools.cache
def _features(executable: str) -> frozenset[str]:
    """Which of the optional options this bwrap knows (its ``--help`` lists them)."""
    try:
        shown = subprocess.run(
            [executable, "--help"], capture_output=True, timeout=10, check=False
        ).stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(option for option in OPTIONAL_FEATURES if option in shown)


@functools.cache
def _problem(executable: str, features: frozenset[str]) -> str | None:
    """Why this bwrap cannot sandbox here, or ``None``; asked once per process."""
    sandbox = Bwrap(executable, features=features)
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
