"""The owner's decision on a skill's files: what it is, what it may do, what changed; and
pinning the files once the owner said yes.

Installing, updating, re-approving a changed skill and approving the assistant's proposal
all show the same :class:`Review` (``switchboard skills`` on the terminal, ``/skills`` in the
chat) and end in :func:`pin`, which records the sha256 of every file in the lock file.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path

from agent.skills.diff import FileChange, code, file_changes, shown
from agent.skills.library import (
    SKILL_NAME,
    FrontMatterError,
    Skill,
    SkillLibrary,
    read_skill,
    suspicious,
)
from agent.skills.lock import LINK, Changes, LockEntry, SkillLock, compare, digests, now
from agent.skills.permissions import DeclarationError, Permissions
from agent.skills.unpack import SKILL_FILE
from agent.tools.names import unknown_tool

MAX_SCANNED_BYTES = 256 * 1024  # of each text file, scanned for download-and-run lines
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".js", ".mjs", ".rb", ".pl")


class ReviewError(Exception):
    """The folder is not an installable skill; the message says why."""


@dataclass(frozen=True, slots=True)
class Review:
    name: str  # its folder under skills/
    skill: Skill
    files: dict[str, str]  # relative path -> sha256
    scripts: tuple[str, ...]
    warnings: tuple[str, ...]
    changes: Changes | None = None  # against the files approved before, if any
    wider: tuple[str, ...] = ()  # what it may do now that it could not before
    configured_secrets: frozenset[str] = frozenset()  # skills.secrets' names, set or not
    hand_written: bool = False  # in skills/ without a lock entry: approving it pins it
    change: tuple[FileChange, ...] = ()  # what changed, line by line (when copies were kept)

    @property
    def code(self) -> str:
        """Stands for the files as they are now: approving a changed skill in the chat takes
        it, as shown beside the change (:func:`agent.skills.diff.code`)."""
        return code(self.name, self.files)

    def change_lines(self, *, per_file: int, total: int) -> tuple[list[str], bool]:
        """The change as diff lines, cut to fit; and whether all of it is there."""
        return shown(self.change, per_file=per_file, total=total)

    def lines(self) -> list[str]:
        """What the owner reads before saying yes."""
        configured_secrets = self.configured_secrets
        skill = self.skill
        size = sum((self.skill.folder / f).stat().st_size for f in self.files)
        lines = [f"{self.name}: {skill.description or '(no description)'}"]
        lines.append(f"  files: {len(self.files)} ({_size(size)})")
        if self.changes:
            lines.append(f"  changed since approved: {self.changes.describe()}")
        lines.append("  may use:" + ("" if skill.bounded else " anything the person may"))
        for line in skill.permissions.lines():
            shown = line
            if line.startswith("secrets:") and skill.permissions.secrets:
                shown = "secrets: " + ", ".join(
                    f"{s} ({'set' if s in configured_secrets else 'not set'})"
                    for s in skill.permissions.secrets
                )
            lines.append(f"    {shown}")
        if self.wider:
            lines.append(f"  NEW: it may now also use {', '.join(self.wider)}")
        if skill.triggers:
            lines.append(
                f"  loaded when a message says: {', '.join(t.text for t in skill.triggers)}"
            )
        if self.scripts:
            lines.append(
                f"  scripts (run only in the sandbox, reaching only the hosts above): "
                f"{', '.join(self.scripts)}"
            )
        if self.hand_written:
            lines.append(f"  {_pinning(self.name, skill.permissions)}")
        lines += [f"  WARNING: {w}" for w in self.warnings]
        return lines


def _pinning(name: str, permissions: Permissions) -> str:
    """What pinning a skill written by hand changes (by design: it is then held like an
    installed one), and how it is edited from then on."""
    may = permissions.summary() if permissions.declared else "nothing: it can only be read"
    return (
        f"written by hand: once pinned it is held like an installed skill, to what it "
        f"declares (a turn that loads it may use only: {may}; declare more with tools:, "
        f"network:, paths: in its front matter) and to its files as they are now: after "
        f"you edit them it is left out until you approve it again (switchboard skills "
        f"verify --approve {name}, or /skills approve {name} in the chat)"
    )


def inspect(
    folder: Path,
    name: str,
    *,
    previous: LockEntry | None = None,
    before: Permissions | None = None,
    configured_secrets: Collection[str] = (),
    when: tuple[str, ...] = (),
    hand_written: bool = False,
    mcp_servers: Collection[str] = (),
    lock: SkillLock | None = None,
) -> Review:
    """Read the skill in ``folder`` (to be installed as ``name``) for the owner's decision;
    ``previous`` is its lock entry and ``before`` what it could do, for an update;
    ``hand_written``: an unpinned skill in ``skills/`` (shown as it works now, with what
    pinning it would change); ``mcp_servers``: the configured ones, whose tools it may
    declare (a declared tool no tool has is a warning); ``lock``: where the approved text
    of ``previous``'s files is kept, to show what changed line by line."""
    if not SKILL_NAME.match(name):
        raise ReviewError(
            f"{name!r} cannot be a skill's folder name (lower-case letters, digits, ., - and _)"
        )
    path = folder / SKILL_FILE
    if not path.is_file() or path.is_symlink():
        raise ReviewError(f"there is no {SKILL_FILE} at the top of the skill's folder")
    try:
        skill = read_skill(path, when=when, pinned=not hand_written)
    except (FrontMatterError, DeclarationError) as exc:
        raise ReviewError(f"{SKILL_FILE}: {exc}") from None
    files = digests(folder)
    links = [f for f, digest in files.items() if digest == LINK]
    if links:
        raise ReviewError(f"{', '.join(links)}: links are not allowed in a skill")
    scripts = tuple(f for f in files if _is_script(folder / f))
    warnings = [
        f"{relative}: {reason}"
        for relative in (SKILL_FILE, *scripts)
        for reason in suspicious(_head(folder / relative))
    ]
    warnings += [f"{SKILL_FILE} {why}" for _, why in unknown_tools(skill, mcp_servers)]
    warnings += [
        f"it needs the secret {s}, which is not set (skills.secrets.{s} in .env or config.toml)"
        for s in skill.permissions.secrets
        if s not in configured_secrets
    ]
    changes = None if previous is None else compare(previous.files, files)
    return Review(
        name=name,
        skill=skill,
        files=files,
        scripts=scripts,
        warnings=tuple(warnings),
        changes=changes,
        wider=() if before is None else tuple(skill.permissions.wider_than(before)),
        configured_secrets=frozenset(configured_secrets),
        hand_written=hand_written,
        change=(
            file_changes(lock, previous.files, folder, changes)
            if lock is not None and previous is not None and changes
            else ()
        ),
    )


def unknown_tools(skill: Skill, mcp_servers: Collection[str]) -> list[tuple[str, str]]:
    """The tools ``skill`` declares that no tool here has, each with why (naming the nearest
    known names): install, show, approve, ``skills list`` and doctor warn about them."""
    return [
        (tool, why)
        for tool in skill.permissions.tools
        if (why := unknown_tool(tool, mcp_servers)) is not None
    ]


def pin(lock: SkillLock, review: Review, entry: LockEntry) -> LockEntry:
    """Record the reviewed files as the approved ones (``entry`` says where they came from),
    keeping a copy of their text to show what changes later."""
    lock.keep(review.skill.folder, review.files)
    pinned = replace(
        entry, name=review.name, files=dict(review.files), approved=now(), when=entry.when
    )
    lock.put(pinned)
    return pinned


def review_installed(library: SkillLibrary, name: str) -> Review:
    """A skill in ``skills/`` as it is on disk now, against the files approved before (to
    approve it again), or a hand-written one (to pin it)."""
    folder = library.directory / name
    if not SKILL_NAME.match(name) or not folder.is_dir() or folder.is_symlink():
        raise ReviewError(f"no skill folder named {name} in {library.directory}")
    entry = library.lock.get(name)
    return inspect(
        folder,
        name,
        previous=entry,
        configured_secrets=library.configured_secrets,
        when=entry.when if entry else (),
        hand_written=entry is None,
        mcp_servers=library.mcp_servers,
        lock=library.lock,
    )


def approve(library: SkillLibrary, review: Review) -> LockEntry:
    """Pin a skill's files as they are now: one changed since approved, or one written by
    hand (from then on held to what it declares, like an installed one)."""
    entry = library.lock.get(review.name) or LockEntry(
        name=review.name, kind="local", source=f"written in skills/{review.name}"
    )
    return pin(library.lock, review, entry)


def _is_script(path: Path) -> bool:
    return path.suffix in SCRIPT_SUFFIXES or (path.stat().st_mode & 0o111 != 0)


def _head(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(MAX_SCANNED_BYTES).decode("utf-8", errors="replace")


def _size(size: int) -> str:
    return f"{size} bytes" if size < 1024 else f"{size / 1024:.1f} KB"
