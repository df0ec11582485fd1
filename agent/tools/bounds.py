"""What a turn may still reach once it loaded a skill: no more than the skill declared.

A skill says in its front matter which tools, web hosts, workspace paths and secrets it
needs (:mod:`agent.skills.permissions`). A turn that loads one, by a trigger or with
``get_skill``, keeps from then on only what *every* skill it loaded declared, on top of
what the person's own policy allows: the policy refuses any other tool
(:meth:`agent.policy.ToolPolicy.refusal`), ``web_fetch`` any other host, the file tools any
other path (:meth:`agent.workspace.Workspace.confined`), and a skill's script gets only its
own secrets. Nothing a skill says widens the policy; what it declares only narrows it.

Every bounded turn keeps :data:`ALWAYS`: reading the skills it loaded (their folders are
readable whatever the declared paths) and running their scripts in the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# What a turn that loaded a skill keeps whatever the skill declared: loading skills,
# reading (confined to the skills' folders and the declared paths), their own scripts.
ALWAYS = frozenset({"get_skill", "read_file", "list_dir", "run_skill_script"})


@dataclass(frozen=True, slots=True)
class Grant:
    """What one skill may use, as it declared it."""

    skill: str
    folder: Path  # the skill's own folder: always readable in a turn that loaded it
    tools: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()  # names, or "*.example.com" for its subdomains
    paths: tuple[str, ...] = ()  # relative to the workspace; a folder ends with "/"
    secrets: tuple[str, ...] = ()  # environment variable names its scripts get

    def allows_host(self, host: str) -> bool:
        name = host.strip().strip("[]").rstrip(".").lower()
        return any(
            name == allowed or (allowed.startswith("*.") and name.endswith(allowed[1:]))
            for allowed in self.hosts
        )


@dataclass(frozen=True, slots=True)
class Bounds:
    """The skills a turn loaded and what they allow; no grants: the turn is not narrowed."""

    grants: tuple[Grant, ...] = ()

    @property
    def narrowed(self) -> bool:
        return bool(self.grants)

    def with_grant(self, grant: Grant) -> Bounds:
        if any(g.skill == grant.skill for g in self.grants):
            return self
        return Bounds((*self.grants, grant))

    def grant(self, skill: str) -> Grant | None:
        return next((g for g in self.grants if g.skill == skill), None)

    def tool_refusal(self, tool: str) -> str | None:
        """Why ``tool`` is out of this turn's reach, or ``None``."""
        if tool in ALWAYS:
            return None
        for grant in self.grants:
            if tool not in grant.tools:
                declared = ", ".join(sorted(grant.tools))
                allowed = f"may use only {declared}" if declared else "declares no tools"
                return (
                    f"{tool} is not available in this turn: it loaded the skill "
                    f"{grant.skill!r}, which {allowed}"
                )
        return None

    def host_refusal(self, host: str) -> str | None:
        """Why ``host`` may not be reached in this turn, or ``None``."""
        for grant in self.grants:
            if not grant.allows_host(host):
                declared = ", ".join(sorted(grant.hosts))
                allowed = f"may reach only {declared}" if declared else "declares no web hosts"
                return (
                    f"{host} is not reachable in this turn: it loaded the skill "
                    f"{grant.skill!r}, which {allowed}"
                )
        return None

    def paths(self) -> tuple[str, ...]:
        """The workspace paths every loaded skill declared (a path inside another's counts)."""
        if not self.grants:
            return ()
        first, *others = self.grants
        return tuple(
            path
            for path in first.paths
            if all(any(_inside(path, theirs) for theirs in other.paths) for other in others)
        )

    def folders(self) -> tuple[Path, ...]:
        return tuple(g.folder for g in self.grants)

    def who(self) -> str:
        """The skills that narrow the turn, and the paths they leave it, in words."""
        names = " and ".join(repr(g.skill) for g in self.grants)
        paths = ", ".join(self.paths()) or "none but its own folder"
        return f"the skill{'s' if len(self.grants) > 1 else ''} {names} (paths: {paths})"


def _inside(path: str, folder: str) -> bool:
    mine, theirs = Path(path).parts, Path(folder).parts
    return mine[: len(theirs)] == theirs
