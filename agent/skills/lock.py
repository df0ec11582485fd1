"""The lock file: where each installed skill came from and the sha256 of every file it has.

``skills/skills.lock`` (JSON, in the workspace, read-only for the assistant like the rest of
``skills/``) has one entry per skill folder that was installed, approved from a proposal or
re-approved by the owner. A skill whose files differ from its entry (a file changed, added
or removed, a link appeared) has *changed since it was approved*: the library leaves it out
of every prompt and never loads or runs it until the owner approves it again
(``switchboard skills verify --approve NAME`` or ``/skills approve NAME``), which records the
files as they are now. A folder without an entry is a skill the owner wrote by hand.

Beside it, ``skills/.approved/<sha256>`` keeps a copy of each approved *text* file (at most
:data:`MAX_KEPT_BYTES`), by its digest, so the owner asked to approve a changed skill again
is shown what changed, line by line (:mod:`agent.skills.diff`); a copy whose content no
longer has its name's digest is not believed. Copies no entry names any more are deleted
whenever an entry is written or dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from gateway.core.system.fileutil import write_atomic

LOCK_FILE = "skills.lock"
FORMAT = 1
KEPT = ".approved"  # beside the lock file: the approved text files' content, by sha256
MAX_KEPT_BYTES = 256 * 1024  # a larger file is named as changed, never shown

SourceKind = Literal["folder", "git", "archive", "registry", "proposal", "local"]
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
LINK = "link"  # what a symbolic link is recorded as: never a sha256, so never "unchanged"


class LockError(Exception):
    """The lock file cannot be read (the message names it and says why)."""


@dataclass(frozen=True, slots=True)
class LockEntry:
    name: str  # the skill's folder under skills/
    kind: SourceKind
    source: str  # as the owner gave it (a folder, a URL, a registry name)
    version: str = ""
    origin: str = ""  # what was fetched: the archive's URL, the git commit
    sha256: str = ""  # of the archive, when there was one
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    approved: str = ""  # when the owner approved these files (ISO 8601, UTC)
    when: tuple[str, ...] = ()  # triggers the owner added at install, besides the skill's own


@dataclass(frozen=True, slots=True)
class Changes:
    """How a skill's folder differs from its lock entry."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.modified)

    def describe(self) -> str:
        parts = [
            f"{label} {', '.join(names[:5])}{' …' if len(names) > 5 else ''}"
            for label, names in (
                ("changed", self.modified),
                ("added", self.added),
                ("removed", self.removed),
            )
            if names
        ]
        return "; ".join(parts)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` by relative path (``/``-separated); a symbolic
    link or anything else that is not a plain file or folder is recorded as :data:`LINK`."""
    found: dict[str, str] = {}
    for current, folders, files in os.walk(folder, followlinks=False):
        base = Path(current)
        folders.sort()
        for name in [*sorted(files), *(f for f in folders if (base / f).is_symlink())]:
            path = base / name
            relative = path.relative_to(folder).as_posix()
            mode = os.lstat(path).st_mode
            found[relative] = file_digest(path) if stat.S_ISREG(mode) else LINK
        folders[:] = [f for f in folders if not (base / f).is_symlink()]
    return found


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def as_text(data: bytes) -> str | None:
    """``data`` as text to show line by line; ``None`` for a binary file (not UTF-8, or with
    a NUL byte) or one larger than :data:`MAX_KEPT_BYTES`."""
    if len(data) > MAX_KEPT_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def compare(recorded: dict[str, str], present: dict[str, str]) -> Changes:
    return Changes(
        added=tuple(sorted(set(present) - set(recorded))),
        removed=tuple(sorted(set(recorded) - set(present))),
        modified=tuple(
            sorted(p for p in set(recorded) & set(present) if recorded[p] != present[p])
        ),
    )


class SkillLock:
    """``skills/skills.lock``: read afresh when it changed on disk, written whole (atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._entries: dict[str, LockEntry] = {}

    def stamp(self) -> tuple[int, int]:
        """The file's modification time and size (0, 0 when there is none)."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return (0, 0)
        return (info.st_mtime_ns, info.st_size)

    def entries(self) -> dict[str, LockEntry]:
        stamp = self.stamp()
        if stamp != self._seen:
            self._entries = self._read()
            self._seen = stamp
        return dict(self._entries)

    def get(self, name: str) -> LockEntry | None:
        return self.entries().get(name)

    def put(self, entry: LockEntry) -> None:
        entries = self.entries()
        entries[entry.name] = entry
        self._write(entries)
        self._prune()

    def drop(self, name: str) -> None:
        entries = self.entries()
        if entries.pop(name, None) is not None:
            self._write(entries)
            self._prune()

    @property
    def kept(self) -> Path:
        return self.path.parent / KEPT

    def keep(self, folder: Path, files: dict[str, str]) -> None:
        """Keep a copy of each text file of ``files`` (relative path -> sha256, read from
        ``folder``), before they are :meth:`put` as approved. A file that no longer has its
        recorded digest is not kept (it is not what was reviewed)."""
        for relative, digest in files.items():
            target = self.kept / digest
            if digest == LINK or target.exists():
                continue
            try:
                if (folder / relative).stat().st_size > MAX_KEPT_BYTES:
                    continue
                data = (folder / relative).read_bytes()
            except OSError:
                continue
            if as_text(data) is not None and hashlib.sha256(data).hexdigest() == digest:
                write_atomic(target, data)

    def approved_text(self, digest: str) -> str | None:
        """The approved content with this sha256, if a copy was kept (``None`` for a file
        approved before copies were kept, a binary or too large one, or a damaged copy)."""
        try:
            data = (self.kept / digest).read_bytes()
        except (OSError, ValueError):
            return None
        return as_text(data) if hashlib.sha256(data).hexdigest() == digest else None

    def _prune(self) -> None:
        """Delete the kept copies no entry names."""
        if not self.kept.is_dir():
            return
        named = {d for e in self.entries().values() for d in e.files.values()}
        for copy in self.kept.iterdir():
            if _DIGEST.match(copy.name) and copy.name not in named:
                copy.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # none left: no folder either
            self.kept.rmdir()

    def changes(self, name: str, folder: Path) -> Changes | None:
        """How ``folder`` differs from its entry; ``None`` when it has none (hand-written)."""
        entry = self.get(name)
        if entry is None:
            return None
        return compare(entry.files, digests(folder))

    def _read(self) -> dict[str, LockEntry]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise LockError(f"{self.path} cannot be read: {exc}") from None
        skills = data.get("skills") if isinstance(data, dict) else None
        if not isinstance(skills, dict):
            raise LockError(f"{self.path} is not a skills lock file (no 'skills' table)")
        entries: dict[str, LockEntry] = {}
        for name, raw in skills.items():
            try:
                entries[name] = LockEntry(
                    name=name,
                    kind=raw["kind"],
                    source=str(raw["source"]),
                    version=str(raw.get("version", "")),
                    origin=str(raw.get("origin", "")),
                    sha256=str(raw.get("sha256", "")),
                    files={str(k): str(v) for k, v in raw["files"].items()},
                    approved=str(raw.get("approved", "")),
                    when=tuple(str(w) for w in raw.get("when", ())),
                )
            except (KeyError, TypeError, AttributeError) as exc:
                raise LockError(f"{self.path}: the entry {name!r} is damaged ({exc})") from None
        return entries

    def _write(self, entries: dict[str, LockEntry]) -> None:
        data = {
            "format": FORMAT,
            "skills": {
                name: {k: v for k, v in asdict(entry).items() if k != "name"}
                for name, entry in sorted(entries.items())
            },
        }
        write_atomic(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        self._seen = None
