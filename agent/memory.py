"""Long-term memory and daily notes, scoped per principal.

Each conversation reads and writes the memory of its own scope only:

- the owner's direct chats (and the terminal): ``MEMORY.md`` and ``memory/YYYY-MM-DD.md``;
- another person's direct chat: ``memory/people/<channel>-<id>/``;
- a group: ``memory/groups/<channel>-<chat>/``.

So a fact told in a DM never enters a group's context, and one user's notes never reach
another. The scope comes from the platform identity, never from the model.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Literal

from gateway.core.messages import ChatRef, ChatType
from gateway.core.principal import Principal
from gateway.core.system.fileutil import private_folders, write_atomic
from gateway.core.text.textutil import only_headings, without_comments

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
PEOPLE = "memory/people"  # a folder per person (their direct chats' memory)
GROUPS = "memory/groups"  # a folder per group


@dataclass(slots=True)
class _Cached:
    stamp: tuple[int, int, int]
    text: str
    written: bool  # something is written in it: not only headings, comments or blanks
    prompt: str  # what the prompt holds of it: the text without its comments


class FileCache:
    """Reads small text files, re-reading only when they changed: another modification
    time, size or file (a file written whole is a new one: the same size written twice
    within one tick of the file system's clock is still seen)."""

    def __init__(self) -> None:
        self._entries: dict[Path, _Cached] = {}

    def read(self, path: Path, max_chars: int, *, for_prompt: bool = False) -> str | None:
        """The file's text (``None``: no such file); ``for_prompt``: without its comments,
        and ``None`` for an untouched template (headings, comments and blanks cost no
        tokens, and a template's examples are not facts)."""
        cached = self._read(path, max_chars)
        if cached is None or (for_prompt and not cached.written):
            return None
        return cached.prompt if for_prompt else cached.text

    def _read(self, path: Path, max_chars: int) -> _Cached | None:
        try:
            info = path.stat()
        except OSError:
            self._entries.pop(path, None)
            return None
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        cached = self._entries.get(path)
        if cached is not None and cached.stamp == stamp:
            return cached
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(max_chars + 1)
        except OSError:
            return None
        text = text.strip()
        if len(text) > max_chars:
            text = text[:max_chars] + f"\n[... {path.name} truncated at {max_chars} characters]"
        cached = self._entries[path] = _Cached(
            stamp, text, not only_headings(text), without_comments(text)
        )
        return cached


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Where one principal's memory lives, relative to the workspace."""

    kind: Literal["owner", "person", "group"]
    directory: str  # "" for the owner (workspace root), else "memory/people/..." etc.
    label: str

    @property
    def long_term(self) -> str:
        return f"{self.directory}/MEMORY.md" if self.directory else "MEMORY.md"

    def daily(self, day: date) -> str:
        base = self.directory or "memory"
        return f"{base}/{day.isoformat()}.md"


OWNER_SCOPE = MemoryScope("owner", "", "the owner")


def scope_for(principal: Principal, chat: ChatRef) -> MemoryScope:
    if principal.chat_type is not ChatType.DM:
        name = _safe(
            f"{chat.channel}-{chat.chat_id}" + (f"-{chat.thread_id}" if chat.thread_id else "")
        )
        return MemoryScope("group", f"{GROUPS}/{name}", f"the group {chat.channel}:{chat.chat_id}")
    return person_scope(
        principal.person,
        owner=principal.is_owner,
        label=principal.sender_name or principal.sender_id,
    )


def person_scope(person: str, *, owner: bool, label: str = "") -> MemoryScope:
    """The memory of a person's direct chats: the owner's, or the folder of their key (their
    first address), on every channel of theirs."""
    if owner:
        return OWNER_SCOPE
    name = _safe(person.replace(":", "-", 1))
    return MemoryScope("person", f"{PEOPLE}/{name}", label or person)


@dataclass(frozen=True, slots=True)
class RecallScope:
    """Whose past conversations a session's are, for ``memory_search``: the owner's (every
    owner identity's direct chats), one person's direct chats, or one group's (all its
    threads), of one agent. A person's search sees their own and the groups they spoke
    in; a group's sees the group's (agent/recall/search.py)."""

    key: str  # "<agent>|owner", "<agent>|person:<channel>:<id>", "<agent>|group:<channel>:<chat>"
    group: bool

    @staticmethod
    def prefix(agent: str) -> str:
        """The start of every scope of ``agent``."""
        return f"{agent}|"


def recall_scope(agent: str, principal: Principal, chat: ChatRef) -> RecallScope:
    memory = scope_for(principal, chat)
    prefix = RecallScope.prefix(agent)
    if memory.kind == "group":
        return RecallScope(f"{prefix}group:{chat.channel}:{chat.chat_id}", group=True)
    return RecallScope(
        prefix + person_recall(principal.person, owner=memory.kind == "owner"), False
    )


def person_recall(person: str, *, owner: bool) -> str:
    """Whose past direct conversations a person's are, in a :class:`RecallScope`'s key
    after its agent: the owner's, or the person's (by their key)."""
    return "owner" if owner else f"person:{person}"


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name)[:120] or "_"


class MemoryStore:
    def __init__(
        self, root: Path, *, cache: FileCache | None = None, max_chars: int = 8_000
    ) -> None:
        self.root = root
        self._cache = cache or FileCache()
        self._max_chars = max_chars

    def path(self, relative: str) -> Path:
        return self.root / relative

    def long_term(self, scope: MemoryScope = OWNER_SCOPE, *, for_prompt: bool = False) -> str:
        path = self.path(scope.long_term)
        return self._cache.read(path, self._max_chars, for_prompt=for_prompt) or ""

    def daily(
        self, day: date, scope: MemoryScope = OWNER_SCOPE, *, for_prompt: bool = False
    ) -> str:
        path = self.path(scope.daily(day))
        return self._cache.read(path, self._max_chars // 2, for_prompt=for_prompt) or ""

    def context(self, today: date, scope: MemoryScope = OWNER_SCOPE) -> str:
        """The memory block of the prompt: long-term memory, then yesterday and today."""
        parts = []
        long_term = self.long_term(scope, for_prompt=True)
        if long_term:
            parts.append(f"## Memory ({scope.long_term})\n{long_term}")
        for day in (today - timedelta(days=1), today):
            note = self.daily(day, scope, for_prompt=True)
            if note:
                parts.append(f"## Notes {day.isoformat()}\n{note}")
        return "\n\n".join(parts)


def read_note(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def fold_notes(root: Path, source: MemoryScope, into: MemoryScope, *, origin: str) -> list[str]:
    """Move a person's notes into another's (a link made one person of two): each note is
    added at the end of ``into``'s note of the same kind (long-term memory, the day's
    note), under a heading that names ``origin``, and ``source``'s folder is removed.
    Returns the notes written to (relative to ``root``). Blocking: call it on a worker thread."""
    folder = root / source.directory
    if not source.directory or source.directory == into.directory or not folder.is_dir():
        return []
    written = []
    for path in sorted(folder.glob("*.md")):
        long_term = path.name == "MEMORY.md"
        relative = into.long_term if long_term else f"{into.directory or 'memory'}/{path.name}"
        text = read_note(path).strip().removeprefix(f"# {path.stem}").strip()
        if text:
            target = root / relative
            with exclusive(target):
                current = read_note(target)
                if not current and not long_term:
                    current = f"# {path.stem}\n"
                current = current.rstrip("\n") + "\n\n" if current.strip() else ""
                write_atomic(target, f"{current}## From {origin}\n\n{text}\n")
            written.append(relative)
        path.unlink()
    for lock in folder.glob(".*.lock"):
        lock.unlink()
    with contextlib.suppress(OSError):  # something else in it: left where it was
        folder.rmdir()
    return written


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the note's lock file (``.<name>.lock`` beside it) while it is changed: two turns
    changing the same note at once (two sessions, or two nodes of a cluster sharing the
    workspace) both keep their change."""
    private_folders(path.parent)
    lock = os.open(path.parent / f".{path.name}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        os.close(lock)


def append_note(
    root: Path,
    scope: MemoryScope,
    contents: Sequence[str],
    *,
    to: Literal["today", "memory"],
    now: datetime,
) -> tuple[str, list[str]]:
    """Add lines to the scope's note of today (stamped with the time) or to its long-term
    memory; returns the file (relative to ``root``) and the lines written. Blocking: call it
    on a worker thread."""
    relative = scope.daily(now.date()) if to == "today" else scope.long_term
    path = root / relative
    stamp = f"{now:%H:%M} " if to == "today" else ""
    lines = [f"- {stamp}{content.strip()}" for content in contents]
    with exclusive(path):
        text = read_note(path)
        if not text and to == "today":
            text = f"# {now.date().isoformat()}\n\n"
        elif text and not text.endswith("\n"):
            text += "\n"
        write_atomic(path, text + "".join(f"{line}\n" for line in lines))
    return relative, lines
