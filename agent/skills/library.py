"""Skills with progressive disclosure: a one-line index in the prompt, the full text on demand.

A skill is ``skills/<name>/SKILL.md`` in the workspace, starting with YAML front matter::

    ---
    name: pdf-tools
    description: >
      Extract text from PDFs,
      merge and split them.
    ---

Only names and descriptions enter the system prompt; ``get_skill`` loads one in full. A skill
whose front matter is not valid YAML is left out (logged, and named by ``switchboard
doctor``) rather than shown half-read. Skills are text written by the owner: file tools
cannot write under ``skills/``.

**Routing** (design document 004): a skill may declare when it applies, ``when:`` a phrase
or a list of them (matched as whole words, case-insensitive), or patterns written
``/regex/``. A turn whose messages match is given that skill in full without the model
having to ask (:meth:`SkillLibrary.route`), and its trace says which trigger matched. Only
skills the owner installed are routed: a ``SKILL.md`` reached through a symbolic link out of
``skills/`` (into files a turn could have written) never is.

**Pinned and bounded** (issue 49): a skill installed with ``switchboard skills`` has the
sha256 of each of its files in the lock file (:mod:`agent.skills.lock`); one whose files
changed since is left out, named in :meth:`SkillLibrary.problems`, and never loaded or run
until the owner approves it again. What a skill declares it needs (``tools``, ``network``,
``paths``, ``secrets``: :mod:`agent.skills.permissions`) bounds every turn that loads it
(:mod:`agent.tools.bounds`). Folders whose name starts with a dot (``.proposed/``, where
the assistant's drafts wait for the owner) are never skills.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.skills.lock import LOCK_FILE, LockError, SkillLock
from agent.skills.permissions import DeclarationError, Permissions, declared
from agent.tools.base import Tool, ToolContext, ToolError, ToolResult, schema
from agent.tools.bounds import Bounds, Grant

log = logging.getLogger(__name__)

MAX_SKILL_CHARS = 20_000
MAX_FRONT_MATTER_CHARS = 8_000
MAX_ROUTED = 3  # skills loaded by their triggers into one turn, at most
MAX_MATCHED_CHARS = 20_000  # of each message, the part triggers are matched against
_FENCE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
# What an installed skill's folder may be called (the common format's rule, plus _ and .).
SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class FrontMatterError(ValueError):
    """The front matter of a SKILL.md cannot be read; the message says why."""


class ChangedSkill(Exception):
    """The skill's files are not the ones the owner approved; the message says which."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """One ``when:`` entry: a phrase (whole words) or a ``/pattern/``."""

    text: str  # as the owner wrote it
    pattern: re.Pattern[str]

    def search(self, message: str) -> str | None:
        """The part of ``message`` that matches, or ``None``."""
        found = self.pattern.search(message[:MAX_MATCHED_CHARS])
        return None if found is None else found.group(0)[:80]


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: Path  # its SKILL.md
    triggers: tuple[Trigger, ...] = ()
    permissions: Permissions = field(default_factory=Permissions)
    # Held to its permissions: installed or approved (in the lock file), or it declares some.
    bounded: bool = False

    @property
    def folder(self) -> Path:
        return self.path.parent

    def grant(self) -> Grant | None:
        """What a turn that loads it keeps; ``None`` when it does not narrow the turn."""
        return self.permissions.grant(self.name, self.folder) if self.bounded else None


@dataclass(frozen=True, slots=True)
class Routed:
    """A skill a turn gets because one of its triggers matched one of the turn's messages."""

    skill: Skill
    trigger: str  # the ``when:`` entry that matched
    matched: str  # the text it matched
    body: str


@dataclass(frozen=True, slots=True)
class BrokenSkill:
    path: Path
    reason: str


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter fields, body). No front matter: no fields, the whole text is the body."""
    if not re.match(r"---[ \t]*\r?\n", text):
        return {}, text
    first_line = text.index("\n") + 1
    end = _FENCE.search(text, first_line)
    if end is None:
        raise FrontMatterError("the front matter has no closing --- line")
    try:
        fields = yaml.safe_load(text[first_line : end.start()])
    except yaml.YAMLError as exc:
        # Where the broken construct starts (an unclosed bracket), else where parsing stopped.
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise FrontMatterError(f"the front matter is not valid YAML{where}: {problem}") from None
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        raise FrontMatterError("the front matter is not a set of key: value fields")
    return {str(k).lower(): v for k, v in fields.items()}, text[end.end() :].lstrip("\n")


def triggers(value: Any) -> tuple[Trigger, ...]:
    """The ``when:`` field: a phrase, a ``/pattern/``, or a list of them."""
    if value is None:
        return ()
    entries = value if isinstance(value, list) else [value]
    found = []
    for entry in entries:
        if isinstance(entry, dict | list) or not str(entry).strip():
            raise FrontMatterError("when: each entry is a phrase or a /pattern/")
        text = str(entry).strip()
        if len(text) > 2 and text.startswith("/") and text.endswith("/"):
            try:
                pattern = re.compile(text[1:-1], re.IGNORECASE)
            except re.error as exc:
                raise FrontMatterError(f"when: {text} is not a valid pattern ({exc})") from None
        else:
            words = r"\s+".join(re.escape(word) for word in text.split())
            pattern = re.compile(rf"(?<!\w){words}(?!\w)", re.IGNORECASE)
        found.append(Trigger(text, pattern))
    return tuple(found)


def _one_line(value: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        raise FrontMatterError(f"{field} must be text, not a list or a mapping")
    return " ".join(str(value).split())


# A value shaped like a credential: 16 or more key characters, letters and digits mixed
# (placeholders such as YOUR_API_KEY or sk-your-key-here have no digits; $VARIABLE and
# <your key> are not values).
_KEY = r"(?=[\w+/=.-]*\d)(?=[\w+/=.-]*[A-Za-z])[\w+/=.-]{16,}"
_KEY_NAMES = r"(?:api[_-]?key|access[_-]?key|secret|token|password|passwd)\w*"
# What a supply-chain skill asks for (the ClawHavoc pattern: a "prerequisite" that downloads
# and runs code, or a step that reads the gateway's secrets), and keys left in plain text.
# The scan is an aid for the owner reading `doctor` and the install's review; the boundary
# is the tool policy, which no skill text changes.
SUSPICIOUS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"\b(?:curl|wget|fetch|iwr|Invoke-WebRequest)\b[^\n|]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b",
            re.I,
        ),
        "pipes a download into a shell",
    ),
    (
        re.compile(r"base64\s+(?:-d|--decode|-D)\b[^\n]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b", re.I),
        "decodes base64 into a shell",
    ),
    (
        re.compile(r"(?:config\.toml|\.switchboard\b|\.env\b|\.ssh/|id_rsa)", re.I),
        "refers to the gateway's config or secrets",
    ),
    (
        # a key given to a secret's name (api_key: ..., TOKEN="..."), or a provider's key
        # shape; the name alone ("set your api_key") is no finding
        re.compile(
            rf"""{_KEY_NAMES}["']?\s*[:=]\s*["']?{_KEY}"""
            rf"|\b(?:sk-(?:ant-|proj-)?|gh[pousr]_|xox[abposr]-|AKIA){_KEY}"
            r"|-----BEGIN [A-Z ]*PRIVATE KEY-----",
            re.I,
        ),
        "holds what looks like a secret key in plain text",
    ),
    (
        re.compile(
            r"\b(?:python3?|perl|ruby|node)\s+-[ce]\s+[\"'][^\n]*(?:urllib|requests|socket|http)",
            re.I,
        ),
        "runs inline code that talks to the network",
    ),
)


def suspicious(text: str) -> list[str]:
    """Why a SKILL.md looks like a supply-chain attack (empty when nothing matches)."""
    return [reason for pattern, reason in SUSPICIOUS if pattern.search(text)]


def _stamp(directory: Path) -> tuple[tuple[str, int], ...]:
    """Each ``<directory>/*/SKILL.md`` with its modification time, sorted by path."""
    found = []
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return ()
    for entry in entries:
        if entry.name.startswith("."):  # .proposed/ and staging folders are not skills
            continue
        path = f"{entry.path}/SKILL.md"
        try:
            found.append((path, os.stat(path).st_mtime_ns))  # noqa: PTH116 - every turn
        except (FileNotFoundError, NotADirectoryError):
            continue
    return tuple(sorted(found))


def read_skill(path: Path, *, when: Sequence[str] = (), pinned: bool = False) -> Skill:
    """The skill whose ``SKILL.md`` is ``path``; ``when`` adds triggers (the owner's, from
    the lock file), ``pinned`` holds it to its permissions even if it declares none.
    Raises :class:`FrontMatterError` or :class:`DeclarationError` naming what is wrong."""
    head = path.read_text(encoding="utf-8", errors="replace")[:MAX_FRONT_MATTER_CHARS]
    fields, _ = parse_front_matter(head)
    name = _one_line(fields.get("name"), "name") or path.parent.name
    description = _one_line(fields.get("description"), "description")
    found = triggers([*_listed(fields.get("when")), *when])
    permissions = declared(fields)
    bounded = pinned or permissions.declared
    return Skill(name, description[:200], path, found, permissions, bounded)


class SkillLibrary:
    def __init__(
        self,
        directory: Path,
        lock: SkillLock | None = None,
        *,
        configured_secrets: Collection[str] = (),
        mcp_servers: Collection[str] = (),
    ) -> None:
        self.directory = directory
        self.lock = lock or SkillLock(directory / LOCK_FILE)
        # the names of the secrets a skill's script may be given (skills.secrets): a review
        # says which of those a skill needs are set
        self.configured_secrets = frozenset(configured_secrets)
        # the configured MCP servers (mcp.servers), whose tools a skill may declare: a review
        # names a declared tool that no tool has
        self.mcp_servers = frozenset(mcp_servers)
        self._stamp: tuple[object, ...] | None = None
        self._skills: tuple[Skill, ...] = ()
        self._problems: tuple[BrokenSkill, ...] = ()

    def skills(self) -> tuple[Skill, ...]:
        """The skills that load (re-read when a SKILL.md or the lock file changes)."""
        self._refresh()
        return self._skills

    def problems(self) -> tuple[BrokenSkill, ...]:
        """The SKILL.md files left out, and why (broken front matter, changed since approved)."""
        self._refresh()
        return self._problems

    def _refresh(self) -> None:
        # every turn: a scan, not a glob (pathlib's is slow)
        stamp = (_stamp(self.directory), self.lock.stamp())
        if stamp == self._stamp:
            return
        files = [Path(name) for name, _ in stamp[0]]
        found: list[Skill] = []
        problems: list[BrokenSkill] = []
        for path in files:
            try:
                found.append(self._read(path))
            except (FrontMatterError, DeclarationError, ChangedSkill, LockError) as exc:
                log.warning("skill %s skipped: %s", path, exc)
                problems.append(BrokenSkill(path, str(exc)))
        self._stamp, self._skills, self._problems = stamp, tuple(found), tuple(problems)

    def _read(self, path: Path) -> Skill:
        entry = self.lock.get(path.parent.name)
        if entry is not None:
            problem = self.changed(path.parent)
            if problem is not None:
                raise ChangedSkill(problem)
        return read_skill(path, when=entry.when if entry else (), pinned=entry is not None)

    def changed(self, folder: Path) -> str | None:
        """Why the skill in ``folder`` may not be used now (its files are not the ones the
        owner approved), or ``None``. Asked again before each use, not only when listed."""
        changes = self.lock.changes(folder.name, folder)
        if not changes:
            return None
        entry = self.lock.get(folder.name)
        # pinned after the owner wrote it: its files are held like an install's, by design
        own = (
            "; it was written by hand and pinned, so each edit is approved like this"
            if entry is not None and entry.kind == "local"
            else ""
        )
        return (
            f"changed since it was approved ({changes.describe()}); it is not used until "
            f"the owner approves it again (switchboard skills verify --approve {folder.name}, "
            f"or /skills approve {folder.name} in the chat){own}"
        )

    def index(self) -> str:
        skills = self.skills()
        if not skills:
            return ""
        lines = [f"- {s.name}: {s.description}" for s in skills]
        return "Skills (load one with get_skill before using it):\n" + "\n".join(lines)

    def find(self, name: str) -> Skill | None:
        wanted = name.strip().lower()
        return next((s for s in self.skills() if s.name.lower() == wanted), None)

    def bounds(self, names: Sequence[str]) -> Bounds:
        """What a turn that loaded the skills ``names`` keeps (those that bound it). A name
        no longer found (changed or removed since a resumed turn loaded it) leaves the turn
        only reading: its text is in the conversation already."""
        bounds = Bounds()
        for name in names:
            skill = self.find(name)
            grant = skill.grant() if skill is not None else Grant(name, self.directory / name)
            if grant is not None:
                bounds = bounds.with_grant(grant)
        return bounds

    def body(self, skill: Skill) -> str:
        """The skill's instructions, after checking its files are still the approved ones
        (blocking: call it in a thread). Raises :class:`ChangedSkill` when they are not."""
        if self.lock.get(skill.folder.name) is not None:
            problem = self.changed(skill.folder)
            if problem is not None:
                raise ChangedSkill(problem)
        _, body = parse_front_matter(skill.path.read_text(encoding="utf-8", errors="replace"))
        return body[:MAX_SKILL_CHARS]

    async def route(self, texts: Sequence[str]) -> list[Routed]:
        """The owner's skills whose triggers match ``texts`` (a turn's messages), each with
        the trigger that matched and its instructions; at most :data:`MAX_ROUTED`."""
        routed: list[Routed] = []
        for skill in self.skills():
            hit = next(
                (
                    (trigger.text, matched)
                    for trigger in skill.triggers
                    for text in texts
                    if (matched := trigger.search(text)) is not None
                ),
                None,
            )
            if hit is None or not installed_by_owner(skill.path, self.directory):
                continue
            try:
                body = await asyncio.to_thread(self.body, skill)
            except (OSError, FrontMatterError, ChangedSkill, LockError) as exc:  # since listed
                log.warning("skill %s not loaded: %s", skill.name, exc)
                continue
            routed.append(Routed(skill, hit[0], hit[1], body))
            if len(routed) == MAX_ROUTED:
                break
        return routed


def installed_by_owner(path: Path, directory: Path) -> bool:
    """A ``SKILL.md`` inside ``skills/`` itself, not reached through a symbolic link (one
    could point at files a turn may write, such as attachments)."""
    root = directory.resolve()
    current = path
    while current not in (directory, current.parent):
        if current.is_symlink():
            return False
        current = current.parent
    return path.resolve().is_relative_to(root)


def bounds_note(skill: Skill) -> str:
    """What the model is told a loaded skill leaves the turn."""
    return (
        f"While this turn uses the skill {skill.name}, it may only use: "
        f"{skill.permissions.summary()} (and read the skill's own files)"
    )


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


_ROUTED = "## Skill {name} (loaded because your message matched {trigger!r})"
_ROUTED_NAME = re.compile(r"^## Skill (.+?) \(loaded because your message matched ", re.MULTILINE)


def routed_names(text: str) -> list[str]:
    """The skills :func:`routed_block` put into a message (a resumed turn's bounds)."""
    return _ROUTED_NAME.findall(text)


def routed_block(routed: Sequence[Routed]) -> str:
    """The skills a turn's messages called for, in full, kept with the last of them."""
    return "\n\n".join(
        _ROUTED.format(name=r.skill.name, trigger=r.trigger) + "\n"
        f"{r.body.strip()}" + (f"\n[{bounds_note(r.skill)}]" if r.skill.bounded else "")
        for r in routed
    )


class GetSkill(Tool):
    name = "get_skill"
    description = "Load the full instructions of a skill listed in the system prompt."
    parameters = schema({"name": {"type": "string", "minLength": 1}}, ("name",))

    def __init__(self, library: SkillLibrary) -> None:
        self._library = library

    def available(self) -> bool:
        return bool(self._library.skills())

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        skill = self._library.find(args["name"])
        if skill is None:
            names = ", ".join(s.name for s in self._library.skills()) or "none installed"
            raise ToolError(f"no skill named {args['name']!r}; available: {names}")
        try:
            body = await asyncio.to_thread(self._library.body, skill)
        except (OSError, FrontMatterError, ChangedSkill, LockError) as exc:  # since listed
            raise ToolError(f"skill {skill.name!r} cannot be used: {exc}") from None
        grant = skill.grant()
        if grant is None:
            return ToolResult(body)
        ctx.state.bounds = ctx.state.bounds.with_grant(grant)  # from now on, for this turn
        return ToolResult(f"{body}\n\n[{bounds_note(skill)}]")
