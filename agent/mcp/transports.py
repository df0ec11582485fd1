"""Opening the connection to one MCP server: a sandboxed child process, or an HTTP client.

A stdio server gets a minimal environment: PATH, HOME, LANG, TERM, USER, LOGNAME, SHELL and
the variables configured for it, nothing else (no API keys, no tokens: Switchboard's own
secrets are in its environment, not the server's). Under bubblewrap it sees the system's
programs, its program's own installation, its working directory, the files its arguments
name by absolute path (read-only) and the paths configured for it, and nothing of
Switchboard's home; its stderr goes to ``<log_dir>/<name>.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path
from typing import Protocol, TextIO

from mcp.client._transport import TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent.mcp.spec import HttpTarget, ServerSpec, StdioTarget
from agent.tools.sandbox import SYSTEM_DIRS, Bwrap


class TransportFactory(Protocol):
    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[TransportStreams]:
        """The connection to ``spec``'s server, open while the context lasts."""

    def last_words(self, spec: ServerSpec) -> str:
        """What the server wrote to stderr during its last run (blocking), for errors."""


class Transports:
    """Opens connections: ``sandbox`` wraps stdio servers (``None``: they run on the host);
    ``protected`` paths (Switchboard's home) are never visible inside the sandbox."""

    def __init__(
        self, *, log_dir: Path, sandbox: Bwrap | None = None, protected: Sequence[Path] = ()
    ) -> None:
        self.log_dir = log_dir
        self.sandbox = sandbox
        self.protected = tuple(protected)
        self._log_start: dict[str, int] = {}  # where each server's last run begins in its log

    def __call__(self, spec: ServerSpec) -> AbstractAsyncContextManager[TransportStreams]:
        if isinstance(spec.target, StdioTarget):
            return self._stdio(spec.name, spec.target)
        return _http(spec.target)

    def log_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def last_words(self, spec: ServerSpec) -> str:
        if spec.name not in self._log_start:
            return ""
        try:
            with self.log_file(spec.name).open("rb") as log:
                log.seek(self._log_start[spec.name])
                tail = log.read()[-4_000:].decode("utf-8", errors="replace")
        except OSError:
            return ""
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        return " / ".join(lines[-2:])[-300:]

    def sandboxed(self, target: StdioTarget) -> bool:
        return self.sandbox is not None and target.sandbox

    def command_line(self, target: StdioTarget) -> list[str]:
        """The program and arguments to start, wrapped in bubblewrap when sandboxed."""
        command = [target.command, *target.args]
        if self.sandbox is None or not target.sandbox:
            return command
        sandbox = replace(self.sandbox, network=target.network)
        return sandbox.argv(
            command,
            target.cwd,
            hidden=self.protected,
            extra_read_only=[
                *_installation(target.command),
                *named_files(target.args),
                *target.read_paths,
            ],
            read_write=target.write_paths,
        )

    @contextlib.asynccontextmanager
    async def _stdio(self, name: str, target: StdioTarget) -> AsyncIterator[TransportStreams]:
        if self.sandboxed(target) and shutil.which(target.command) is None:
            # said as unsandboxed, not as the wrapper that would fail to start it ("prlimit:
            # failed to execute ...")
            self._log_start.pop(name, None)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", target.command)
        command, *args = self.command_line(target)
        params = StdioServerParameters(
            command=command,
            args=args,
            env=server_environment(target, sandboxed=self.sandboxed(target)),
            cwd=target.cwd,
        )
        errlog = await asyncio.to_thread(_open_log, self.log_file(name), target.cwd)
        self._log_start[name] = errlog.tell()
        try:
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams
        finally:
            errlog.close()


def server_environment(target: StdioTarget, *, sandboxed: bool) -> dict[str, str]:
    """What a stdio server's process gets (the SDK adds PATH, HOME, LOGNAME, SHELL, TERM and
    USER from ours; none of them is a secret). Inside the sandbox HOME is its working
    directory, so caches (npm, uv) persist between starts."""
    env = {"LANG": os.environ.get("LANG", "C.UTF-8")}
    if sandboxed:
        env["HOME"] = str(target.cwd)
    env.update((key, value.get_secret_value()) for key, value in target.env.items())
    return env


def named_files(args: Sequence[str]) -> list[Path]:
    """Existing files named by absolute path in a server's arguments (``python3
    /home/me/srv.py``, the usual way to start a script): the sandbox shows each of them,
    read-only, and only that file (modules next to it need ``read_paths``)."""
    files = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if not value.startswith("/"):
            continue
        path = Path(value)
        with contextlib.suppress(OSError):
            if path.is_file():
                files.append(path)
    return files


def _installation(command: str) -> list[Path]:
    """Where a program lives, so the sandbox can show it: ``/opt/node/bin/node`` -> ``/opt/node``,
    a virtualenv's ``python`` -> the virtualenv and the Python it links to. System
    directories are visible anyway; a home directory as a whole is never shown."""
    found = shutil.which(command)
    if found is None:
        return []
    roots = []
    for path in (Path(found).absolute(), Path(found).resolve()):
        directory = path.parent
        root = directory.parent if directory.name == "bin" else directory
        if any(root.is_relative_to(system) for system in SYSTEM_DIRS):
            continue
        if root in (Path("/"), Path.home()) or len(root.parts) < 3:
            continue
        roots.append(root)
    return list(dict.fromkeys(roots))


MAX_LOG_BYTES = 5_000_000  # a chatty server's log starts over past this


def _open_log(path: Path, cwd: Path) -> TextIO:
    cwd.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    too_big = path.exists() and path.stat().st_size > MAX_LOG_BYTES
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if too_big else os.O_APPEND)
    # 0600 like Switchboard's own logs: a server may print what it should not.
    return os.fdopen(os.open(path, flags, 0o600), "a", encoding="utf-8")


@contextlib.asynccontextmanager
async def _http(target: HttpTarget) -> AsyncIterator[TransportStreams]:
    headers = {key: value.get_secret_value() for key, value in target.headers.items()}
    if target.transport == "sse":
        async with sse_client(target.url, headers=headers) as streams:
            yield streams
        return
    async with (
        create_mcp_http_client(headers=headers) as client,
        streamable_http_client(target.url, http_client=client) as streams,
    ):
        yield streams
