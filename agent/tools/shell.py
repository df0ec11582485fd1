"""The ``exec`` tool: a shell command in the workspace, bounded in time, output and reach.

The command runs in its own process group with the workspace as working directory and
HOME, and an environment built from scratch (no API keys, tokens or passwords of ours).
At the time limit the whole group is killed. Where bubblewrap works, the command runs in
the OS sandbox of :mod:`agent.tools.sandbox` (the boundary). A deny list refuses commands
that destroy data or fetch-and-run code; it is a second layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.tools.base import (
    Effect,
    Outside,
    Reach,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    schema,
)
from agent.tools.sandbox import Bwrap, CannotLock
from gateway.core.system.portguard import NetworkUnguarded

DEFAULT_DENY_PATTERNS: tuple[str, ...] = (
    r"\brm\s+(-[a-z]*[rf][a-z]*\s+)+(/|~|\$HOME|\.\.)(\s|/|$)",  # rm -rf / ~ ..
    r"\brm\s+(-[a-z]*[rf][a-z]*\s+)+\*",  # rm -rf *
    r"\bmkfs(\.\w+)?\b",
    r"\bdd\s+.*\bof=/dev/",
    r">\s*/dev/(sd|nvme|hd|vd|xvd)",
    r"\b(shutdown|reboot|halt|poweroff)\b",
    r"\binit\s+[06]\b",
    r":\(\)\s*\{\s*:\|:&\s*\};\s*:",  # fork bomb
    r"\|\s*(\S*/)?(ba|z|da|k|fi)?sh\b",  # curl ... | sh, | /bin/bash
    r"\bbase64\s+(-d|--decode)\b.*\|",
    r"\b(curl|wget)\b.*\|\s*(\S*/)?\w*(python|perl|ruby|node|php)",
    r"(\$\(|`|<\()\s*(curl|wget)\b",  # sh -c "$(curl ...)", bash <(curl ...)
    r"\beval\b.*\b(curl|wget)\b",
    r"\bchmod\s+(-R\s+)?[0-7]*777\s+/",
    r"\bchown\s+-R\b.*\s/(\s|$)",
    r">\s*/etc/(passwd|shadow|sudoers)\b",  # a write into them (not "cat ... 2>&1")
    r"\btee\b.*\s/etc/(passwd|shadow|sudoers)\b",
    r"\bsudo\b",
    r"\bnc\b.*\s-e\s",
)

_SAFE_ENV_KEYS = ("LANG", "LC_ALL", "TZ")


def clean_environment(workspace: Path) -> dict[str, str]:
    """A minimal environment: nothing from ours leaks into the child."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workspace),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
    }
    for key in _SAFE_ENV_KEYS:
        if key in os.environ:
            env[key] = os.environ[key]
    return env


class Exec(Tool):
    name = "exec"
    description = (
        "Run a shell command in the workspace (time-limited); returns exit code and output."
    )
    parameters = schema(
        {
            "command": {"type": "string", "minLength": 1},
            "timeout": {"type": "number", "minimum": 1, "description": "Seconds (capped)"},
        },
        ("command",),
    )
    effect = Effect.EXEC
    intent = ("run", "execute", "command", "exec")  # a hint for the approver (agent.policy)
    does = "runs a command"

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside("command output", str(args.get("command", ""))[:200])

    def __init__(
        self,
        *,
        timeout: float = 60.0,
        max_output_chars: int = 10_000,
        extra_deny_patterns: Sequence[str] = (),
        protected_paths: Sequence[Path] = (),
        sandbox: Bwrap | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._protected = tuple(protected_paths)
        self._timeout = timeout
        self._max_output = max_output_chars
        # Commands naming the gateway's state (data directory, config file) are refused too.
        protected = [re.escape(str(p)) for p in protected_paths]
        self._deny = [
            re.compile(p, re.IGNORECASE)
            for p in (*DEFAULT_DENY_PATTERNS, *protected, *extra_deny_patterns)
        ]

    def denied(self, command: str) -> str | None:
        normalized = " ".join(command.split())
        for pattern in self._deny:
            if pattern.search(normalized):
                return pattern.pattern
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command: str = args["command"]
        if self.denied(command):
            raise ToolError(
                "this command is blocked by the exec deny list (destructive or fetch-and-run)"
            )
        timeout = min(float(args.get("timeout") or self._timeout), self._timeout)
        sandbox = self._sandbox
        if sandbox is None:
            _refuse_protected_names(command, ctx)
        if sandbox is None or sandbox.pids is None:
            return await self._run(command, seconds=timeout, ctx=ctx, cgroup_procs=None)
        async with sandbox.pids.group(sandbox.limits.max_processes) as procs:
            return await self._run(command, seconds=timeout, ctx=ctx, cgroup_procs=procs)

    async def reach(self, args: dict[str, Any], ctx: ToolContext) -> Reach:
        """What the command could read and write, for the approval prompt."""
        if self._sandbox is None:
            return Reach(
                "no sandbox: it runs as the gateway's own user and can read and write "
                "whatever that user can"
            )
        reads, writes = ctx.workspace.reach()
        network = "yes (not the gateway's own ports)" if self._sandbox.network else "none"
        return Reach(f"can read: {reads}\ncan write: {writes}\nnetwork: {network}")

    async def _run(
        self, command: str, *, seconds: float, ctx: ToolContext, cgroup_procs: Path | None
    ) -> ToolResult:
        argv = ["/bin/sh", "-c", command]
        if self._sandbox is not None:
            # What the turn may not write (protected files, what is hidden from it) is
            # read-only in the sandbox too; blocking (it may create mount points): a thread.
            try:
                argv = await asyncio.to_thread(
                    self._sandbox.argv,
                    argv,
                    ctx.workspace.root,
                    hidden=self._protected,
                    read_only=ctx.workspace.locked(),
                    covered=ctx.workspace.covered(),
                    uncovered=ctx.workspace.uncovered(),
                    cgroup_procs=cgroup_procs,
                )
            except (CannotLock, NetworkUnguarded) as exc:
                raise ToolError(str(exc)) from None
        return await run_command(
            argv,
            cwd=ctx.workspace.root,
            env=clean_environment(ctx.workspace.root),
            seconds=seconds,
            max_output=self._max_output,
        )


async def run_command(
    argv: Sequence[str], *, cwd: Path, env: dict[str, str], seconds: float, max_output: int
) -> ToolResult:
    """Run ``argv`` in its own process group; its output (stdout and stderr, capped at
    ``max_output`` characters) and exit code as an untrusted result. At ``seconds`` the
    whole group is killed."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    output = bytearray()
    dropped = 0

    async def collect() -> None:
        nonlocal dropped
        assert process.stdout is not None
        while chunk := await process.stdout.read(65_536):
            room = max_output - len(output)
            output.extend(chunk[: max(room, 0)])
            dropped += max(len(chunk) - max(room, 0), 0)
        await process.wait()

    timed_out = False
    try:
        await asyncio.wait_for(collect(), seconds)
    except TimeoutError:
        timed_out = True
    finally:
        _kill_group(process.pid)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(process.wait(), 5)
    text = output.decode("utf-8", errors="replace")
    if dropped:
        text += f"\n[... {dropped} more bytes of output dropped]"
    if timed_out:
        return ToolResult(
            f"command timed out after {seconds:g}s and was killed\n{text}".rstrip(),
            is_error=True,
            untrusted=True,
        )
    code = process.returncode
    return ToolResult(f"exit code {code}\n{text}".rstrip(), is_error=code != 0, untrusted=True)


def _refuse_protected_names(command: str, ctx: ToolContext) -> None:
    """Without the sandbox nothing binds protected files read-only: a command that names
    one this turn may not change is refused (a second layer; it reads only the text)."""
    said = command.casefold()
    for locked in ctx.workspace.locked():
        rule = ctx.workspace.protection(locked.path)
        if rule is not None and rule.path.casefold() in said:
            raise ToolError(
                f"this command names {rule.path}, which this turn may not change "
                f"({rule.reason}); read it with read_file instead"
            )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
