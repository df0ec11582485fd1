"""What changed in a skill's files since the owner approved them, line by line.

The owner asked to approve a changed skill again (``/skills``, ``/skills show NAME``,
``/skills approve NAME``; ``switchboard skills show``, ``verify``, ``update``) reads this
first: a unified diff (git's shape) of each changed or added text file against the copy
kept when it was approved (:meth:`agent.skills.lock.SkillLock.keep`); a binary or very
large file is only named, and so is one approved before copies were kept (shown as it is
now). :func:`shown` cuts it to fit a chat message, saying what it left out.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from agent.skills.lock import MAX_KEPT_BYTES, Changes, SkillLock, as_text

CONTEXT = 2  # unchanged lines around each change


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str  # relative to the skill's folder
    lines: tuple[str, ...]


def file_changes(
    lock: SkillLock, approved: dict[str, str], folder: Path, changes: Changes
) -> tuple[FileChange, ...]:
    """Each file of ``changes`` (``folder`` against the ``approved`` digests) as diff lines."""
    found = [
        FileChange(path, _changed(lock.approved_text(approved[path]), folder, path))
        for path in changes.modified
    ]
    found += [FileChange(path, _changed(None, folder, path, added=True)) for path in changes.added]
    found += [FileChange(path, (f"{path}: removed",)) for path in changes.removed]
    return tuple(found)


def _changed(
    before: str | None, folder: Path, path: str, *, added: bool = False
) -> tuple[str, ...]:
    """``before``: the approved text (``None``: no copy kept, or ``added``)."""
    what = "added" if added else "changed"
    now_path = folder / path
    try:
        size = now_path.stat().st_size
        now = as_text(now_path.read_bytes()) if size <= MAX_KEPT_BYTES else None
    except OSError as exc:
        return (f"{path}: {what}, cannot be read ({exc.strerror})",)
    if now is None:
        why = "binary" if size <= MAX_KEPT_BYTES else f"too large to show ({size // 1024} KB)"
        return (f"{path}: {what}, {why}: not shown",)
    if before is None and not added:
        return (
            f"{path}: changed; no copy of the approved version is kept (approved before "
            f"copies were kept, or not text), so here it is as it is now:",
            *(f" {line}" for line in now.split("\n")),
        )
    diff = difflib.unified_diff(
        [] if before is None else before.split("\n"),
        now.split("\n"),
        fromfile="/dev/null" if added else f"{path} (approved)",
        tofile=f"{path} (now)",
        n=CONTEXT,
        lineterm="",
    )
    return tuple(diff) or (f"{path}: changed in a way no line shows",)


def code(name: str, files: dict[str, str]) -> str:
    """Six characters that stand for exactly these files of skill ``name``: shown with the
    change, and given back to approve it (so what is approved is what was shown; any later
    change gives another code)."""
    digest = hashlib.sha256(json.dumps([name, sorted(files.items())]).encode()).digest()
    return base64.b32encode(digest[:5]).decode()[:6]


def shown(changes: tuple[FileChange, ...], *, per_file: int, total: int) -> tuple[list[str], bool]:
    """At most ``per_file`` lines of each file's change and ``total`` in all, with a line
    saying what was left out; and whether every line was shown."""
    lines: list[str] = []
    complete = True
    for position, change in enumerate(changes):
        room = min(per_file, total - len(lines))
        if room <= 1:
            rest = ", ".join(c.path for c in changes[position:])
            lines.append(f"… and the change of {rest}: not shown")
            return lines, False
        if len(change.lines) <= room:
            lines += change.lines
            continue
        lines += change.lines[: room - 1]
        lines.append(f"… {len(change.lines) - room + 1} more lines of {change.path}: not shown")
        complete = False
    return lines, complete
