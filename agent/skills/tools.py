"""The tools that touch skills besides ``get_skill``: running a skill's script, and proposing
a new skill for the owner to approve.

``run_skill_script`` runs a script from the folder of a skill the turn loaded, in the exec
sandbox and nowhere else: the skill's folder read-only as its working directory, the paths
its turn may use (what the skill declared, as far as the person may) and nothing else of the
workspace, a private ``/tmp``, no network but a proxy to the hosts its skill declared
(:mod:`agent.skills.egress`), and an environment built from scratch holding only the
secrets that skill declared (``skills.secrets``). A secret never enters a prompt:
the script's output passes the same redaction as every tool result. It is ``exec`` under
the hood, so the person's policy refuses it wherever it refuses ``exec``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import SecretStr

from agent.skills.egress import Egress, egress
from agent.skills.library import SKILL_NAME, SkillLibrary
from agent.skills.proposals import ProposalError, Proposals
from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from agent.tools.sandbox import Bwrap, CannotLock
from agent.tools.shell import Exec, clean_environment, run_command
from agent.web.ssrf import Guard
from agent.workspace import Locked, PathDenied
from gateway.core.principal import Role

INTERPRETERS = {
    ".py": ("/usr/bin/env", "python3"),
    ".sh": ("/bin/sh",),
    ".bash": ("/usr/bin/env", "bash"),
    ".js": ("/usr/bin/env", "node"),
    ".mjs": ("/usr/bin/env", "node"),
    ".rb": ("/usr/bin/env", "ruby"),
    ".pl": ("/usr/bin/env", "perl"),
}
SCRATCH = Path("/tmp")  # noqa: S108 - the sandbox's own private tmpfs: HOME for a script


class RunSkillScript(Tool):
    name = "run_skill_script"
    description = (
        "Run a script from the folder of a skill loaded in this turn (sandboxed; it reaches "
        "only the hosts the skill declared); returns its exit code and output."
    )
    parameters = schema(
        {
            "skill": {"type": "string", "minLength": 1},
            "script": {"type": "string", "minLength": 1, "description": "e.g. scripts/run.py"},
            "args": {"type": "array", "items": {"type": "string"}, "maxItems": 50},
        },
        ("skill", "script"),
    )
    effect = Effect.EXEC
    intent = Exec.intent
    does = "runs a skill's script"
    runs_as = "exec"

    def __init__(
        self,
        library: SkillLibrary,
        *,
        sandbox: Bwrap | None,
        secrets: Mapping[str, SecretStr],
        timeout: float = 60.0,
        max_output_chars: int = 10_000,
        protected_paths: Sequence[Path] = (),
        guard: Guard | None = None,
    ) -> None:
        self._library = library
        self._guard = guard  # web_fetch's address rules, for the hosts a skill declared
        # Scripts never get the network, whatever tools.exec.network says for exec.
        self._sandbox = None if sandbox is None else dataclasses.replace(sandbox, network=False)
        self._secrets = dict(secrets)
        self._timeout = timeout
        self._max_output = max_output_chars
        self._protected = tuple(protected_paths)

    def available(self) -> bool:
        return self._sandbox is not None and any(s.bounded for s in self._library.skills())

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        skill = self._library.find(args["skill"])
        if skill is None:
            raise ToolError(f"no skill named {args['skill']!r}")
        grant = ctx.state.bounds.grant(skill.name)
        if grant is None:
            if not skill.bounded:
                raise ToolError(
                    f"{skill.name} was written by hand and declares no permissions: its "
                    "scripts run with exec, like any command"
                )
            raise ToolError(f"load the skill first (get_skill {skill.name}), then run its scripts")
        problem = self._library.changed(skill.folder)
        if problem is not None:
            raise ToolError(f"{skill.name} cannot be used: {problem}")
        if self._sandbox is None:
            raise ToolError(
                "skill scripts run only in the sandbox (bubblewrap), which is not available "
                "here; switchboard doctor says why"
            )
        script = _script(skill.folder, str(args["script"]))
        command = [*INTERPRETERS.get(script.suffix, ()), str(script), *args.get("args", ())]
        env = clean_environment(SCRATCH)
        env.update(
            {
                name: self._secrets[name].get_secret_value()
                for name in grant.secrets
                if name in self._secrets
            }
        )
        async with self._way_out(grant.hosts, ctx) as way_out, self._cgroup() as procs:
            read_write = _reachable(ctx, ctx.state.bounds.paths(), write=True)
            if way_out is not None:
                command = way_out.wrap(command)
                read_write.append(way_out.folder)
            try:
                argv = self._sandbox.argv(
                    command,
                    skill.folder,
                    hidden=self._protected,
                    read_only=(Locked(skill.folder, directory=True),),
                    extra_read_only=_reachable(ctx, ctx.state.bounds.paths(), write=False),
                    read_write=read_write,
                    cgroup_procs=procs,
                )
            except CannotLock as exc:
                raise ToolError(str(exc)) from None
            return await run_command(
                argv, cwd=skill.folder, env=env, seconds=self._timeout, max_output=self._max_output
            )

    @contextlib.asynccontextmanager
    async def _way_out(
        self, hosts: frozenset[str], ctx: ToolContext
    ) -> AsyncIterator[Egress | None]:
        """The proxy to the declared hosts (each also allowed by every skill the turn loaded);
        none when the skill declared no host."""
        if not hosts or self._guard is None:
            yield None
            return
        async with egress(self._guard, ctx.state.bounds.host_refusal) as way_out:
            yield way_out

    @contextlib.asynccontextmanager
    async def _cgroup(self) -> AsyncIterator[Path | None]:
        sandbox = self._sandbox
        if sandbox is None or sandbox.pids is None:
            yield None
            return
        async with sandbox.pids.group(sandbox.limits.max_processes) as procs:
            yield procs


def _script(folder: Path, given: str) -> Path:
    """The script's real path: a plain file inside the skill's folder, reached by no link."""
    relative = PurePosixPath(given.replace("\\", "/"))
    if relative.is_absolute() or ".." in relative.parts:
        raise ToolError(f"{given!r}: name a file inside the skill's folder, such as scripts/run.py")
    path = folder.joinpath(*relative.parts)
    if path.resolve() != folder.resolve().joinpath(*relative.parts) or not path.is_file():
        raise ToolError(f"{given!r} is not a file of this skill")
    return path


def _reachable(ctx: ToolContext, paths: Sequence[str], *, write: bool) -> list[Path]:
    """The declared paths this turn's person may write (``write``), or only read."""
    found = []
    for path in paths:
        try:
            real = ctx.workspace.resolve(path, write=True)
            writable = True
        except PathDenied:
            try:
                real = ctx.workspace.resolve(path)
            except PathDenied:
                continue
            writable = False
        if writable == write and real.exists():
            found.append(real)
    return found


class SkillPropose(Tool):
    name = "skill_propose"
    description = (
        "After working out a multi-step procedure, propose it as a skill for next time: the "
        "owner approves, edits or drops it; it is never used before that."
    )
    parameters = schema(
        {
            "name": {"type": "string", "pattern": SKILL_NAME.pattern},
            "description": {"type": "string", "minLength": 1, "maxLength": 300},
            "instructions": {"type": "string", "minLength": 1, "maxLength": 20_000},
            "when": {
                "type": "array",
                "items": {"type": "string", "minLength": 2},
                "description": "phrases in a message that should load it",
            },
            "tools": {"type": "array", "items": {"type": "string"}},
            "network": {"type": "array", "items": {"type": "string"}},
            "paths": {"type": "array", "items": {"type": "string"}},
        },
        ("name", "description", "instructions"),
    )
    effect = Effect.WRITE
    intent = ("skill", "procedure", "remember how")
    does = "proposes a skill to the owner"
    roles = frozenset({Role.OWNER, Role.ADMIN})
    group_chats = False
    rarely_used = True

    def __init__(self, proposals: Proposals) -> None:
        self._proposals = proposals

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        fields: dict[str, Any] = {"name": args["name"], "description": args["description"]}
        for key in ("when", "tools", "network", "paths"):
            if args.get(key):
                fields[key] = list(args[key])
        text = (
            "---\n"
            + yaml.safe_dump(fields, sort_keys=False, allow_unicode=True)
            + "---\n"
            + str(args["instructions"]).strip()
            + "\n"
        )
        try:
            proposal = self._proposals.propose(
                args["name"],
                text,
                by=ctx.principal.person,
                session=ctx.session_key,
                by_owner=ctx.principal.is_owner,
                by_name=ctx.principal.sender_name,
            )
        except ProposalError as exc:
            raise ToolError(str(exc)) from None
        return ToolResult(
            f"Saved the proposal {proposal.name}. It is not used until the owner approves it "
            f"(/skills approve {proposal.name}; /skills show {proposal.name} to read it first)."
        )
