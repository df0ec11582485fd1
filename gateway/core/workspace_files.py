"""The workspace files the owner reads and edits from the web: nothing else, ever.

The bootstrap files the agent reads into every prompt (agent/context.py), the heartbeat's
checklist, long-term memory and daily notes (the owner's, each person's, each group's:
agent/memory.py) and skills (``skills/<name>/SKILL.md``). A name is looked up among the
files listed here, never joined to the workspace's path as given: no other path, and no file
reached through a symbolic link. An edit is saved on top of what the file holds then,
merged with what changed it since the editor read it (:func:`rebased`). All functions here
do blocking file I/O.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gateway.core.text.merge import Merge, merge

BOOTSTRAP_FILES = (
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "IDENTITY.md",
    "TOOLS.md",
    "HEARTBEAT.md",
    "MEMORY.md",
)
MEMORY_DIR = "memory"
SKILLS_DIR = "skills"
MAX_FILES = 400  # memory notes and skills listed, at most
MAX_FILE_BYTES = 256_000  # shown, and editable, up to this size
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\.md")

FileKind = Literal["bootstrap", "memory", "daily", "person", "group", "skill"]


@dataclass(frozen=True, slots=True)
class WorkspaceFile:
    name: str  # relative to the workspace, with "/" ("memory/people/telegram-42/MEMORY.md")
    kind: FileKind
    size: int
    modified: float


@dataclass(frozen=True, slots=True)
class FileText:
    name: str
    text: str
    digest: str  # of the whole file as read: a save names it, so a change meanwhile is seen
    whole: bool  # False: longer than MAX_FILE_BYTES, shown cut and not editable


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listing(workspace: Path) -> list[WorkspaceFile]:
    """Every file the owner may open, bootstrap files first."""
    root = workspace.resolve()
    candidates = [root / name for name in BOOTSTRAP_FILES]
    memory = root / MEMORY_DIR
    if memory.is_dir() and not memory.is_symlink():
        candidates.extend(sorted(memory.rglob("*.md"))[:MAX_FILES])
    skills = root / SKILLS_DIR
    if skills.is_dir() and not skills.is_symlink():
        candidates.extend(sorted(skills.glob("*/SKILL.md"))[:MAX_FILES])
    files = []
    for path in candidates:
        if not _inside(path, root):
            continue
        try:
            info = path.stat()
        except OSError:
            continue
        name = path.relative_to(root).as_posix()
        files.append(WorkspaceFile(name, kind_of(name), info.st_size, info.st_mtime))
    return files


def kind_of(name: str) -> FileKind:
    parts = name.split("/")
    if parts[0] == SKILLS_DIR:
        return "skill"
    if name == "MEMORY.md":
        return "memory"  # the owner's long-term memory
    if parts[0] != MEMORY_DIR:
        return "bootstrap"
    if len(parts) > 2 and parts[1] == "people":
        return "person"
    if len(parts) > 2 and parts[1] == "groups":
        return "group"
    return "daily" if _DAY.fullmatch(parts[-1]) else "memory"


def path_of(workspace: Path, name: str) -> Path | None:
    """The listed file ``name`` (as :func:`listing` names it), or None when it is not one."""
    if name not in {f.name for f in listing(workspace)}:
        return None
    return workspace.resolve() / name


def read(workspace: Path, name: str) -> FileText | None:
    """One listed file's text (cut at ``MAX_FILE_BYTES``), or None when ``name`` is not a
    listed file."""
    path = path_of(workspace, name)
    if path is None:
        return None
    data = path.read_bytes()
    text = data[:MAX_FILE_BYTES].decode("utf-8", errors="replace")
    whole = len(data) <= MAX_FILE_BYTES
    if not whole:
        text += f"\n[... shown up to {MAX_FILE_BYTES} bytes]"
    return FileText(name, text, digest(data), whole)


def rebased(current: FileText, text: str, *, base: str, base_text: str | None) -> Merge:
    """``text``, edited from the version of the file whose digest is ``base``, on top of
    the file as it is now (``current``): as it is when the file did not change; merged with
    what changed it meanwhile (the assistant's note) when ``base_text`` is that version;
    else all of it is a conflict, since nothing tells the two changes apart."""
    if current.digest == base:
        return Merge((text,))
    if base_text is None or digest(base_text.encode("utf-8")) != base:
        base_text = ""
    return merge(base_text, text, current.text)


def _inside(path: Path, root: Path) -> bool:
    """A regular file inside the workspace, reached without symlinks."""
    if not path.is_file():
        return False
    current = path
    while current != root:
        if current.is_symlink():
            return False
        current = current.parent
        if current == current.parent:
            return False
    return path.resolve().is_relative_to(root)
