"""Three-way merge of a text by lines: the owner's edit and what the assistant wrote to the
same file meanwhile, both kept.

The control center's memory editor keeps the version of the file it loaded (the *base*).
When the file changed before a save (the assistant appended a note), the owner's changes
(base to *mine*) and the file's (base to *theirs*) are merged: where only one side changed a
part of the file, that side's lines are taken; where both made the same change, it is taken
once; where both changed the same part differently, or added different lines at the same
place, that part is a :class:`Conflict` for the owner to decide. Nothing is ever decided
for them: a merge with a conflict has no text.

The file is cut into parts at the base lines both sides kept (matched by
:class:`difflib.SequenceMatcher`), the way ``diff3`` does. The merge3 package does the
same under the GPL; this one is the project's own, on the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True, slots=True)
class Conflict:
    """One part both sides changed differently: the lines of each (whole lines, each with
    its line end but perhaps the file's last), and those of the base they replace."""

    base: str
    mine: str
    theirs: str


Part = str | Conflict


@dataclass(frozen=True, slots=True)
class Merge:
    parts: tuple[Part, ...]  # the text in order: merged lines, and the conflicts

    @property
    def conflicts(self) -> tuple[Conflict, ...]:
        return tuple(p for p in self.parts if isinstance(p, Conflict))

    @property
    def text(self) -> str | None:
        """The merged text; ``None`` while a conflict waits for the owner."""
        if self.conflicts:
            return None
        return "".join(p for p in self.parts if isinstance(p, str))


def merge(base: str, mine: str, theirs: str) -> Merge:
    """``mine`` and ``theirs``, both made from ``base``, as one text where they can be."""
    old, ours, other = (text.splitlines(keepends=True) for text in (base, mine, theirs))
    in_ours, in_other = _kept(old, ours), _kept(old, other)
    parts: list[Part] = []
    start = (0, 0, 0)  # where the part after the last line both kept begins, in each text
    for line in range(len(old) + 1):
        last = line == len(old)
        if not last and (line not in in_ours or line not in in_other):
            continue
        end = (line, len(ours), len(other)) if last else (line, in_ours[line], in_other[line])
        parts.extend(
            _decided(old[start[0] : end[0]], ours[start[1] : end[1]], other[start[2] : end[2]])
        )
        if not last:
            parts.append(old[line])
            start = (end[0] + 1, end[1] + 1, end[2] + 1)
    return Merge(_joined(parts))


def _kept(base: list[str], other: list[str]) -> dict[int, int]:
    """Each line of ``base`` that ``other`` kept: its index there (in order: a line kept
    later in base is later in ``other`` too)."""
    matcher = SequenceMatcher(None, base, other, autojunk=False)  # every line counts
    return {
        at + offset: to + offset
        for at, to, size in matcher.get_matching_blocks()
        for offset in range(size)
    }


def _decided(base: list[str], mine: list[str], theirs: list[str]) -> list[Part]:
    """One part between lines both kept: the side that changed it, else a conflict without
    the lines both sides begin or end it with (those are merged: no "keep both" doubles
    them)."""
    if theirs in (mine, base):
        return [*mine]
    if mine == base:
        return [*theirs]
    head = 0
    while head < min(len(mine), len(theirs)) and mine[head] == theirs[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(mine), len(theirs)) - head
        and mine[len(mine) - 1 - tail] == theirs[len(theirs) - 1 - tail]
    ):
        tail += 1
    conflict = Conflict(
        "".join(base),
        "".join(mine[head : len(mine) - tail]),
        "".join(theirs[head : len(theirs) - tail]),
    )
    return [*mine[:head], conflict, *mine[len(mine) - tail :]]


def _joined(parts: list[Part]) -> tuple[Part, ...]:
    """Runs of merged lines as one text each."""
    joined: list[Part] = []
    for part in parts:
        if isinstance(part, str) and joined and isinstance(joined[-1], str):
            joined[-1] += part
        else:
            joined.append(part)
    return tuple(joined)
