"""The agent's workspace and the only way tools turn a path into a file.

Paths are relative to the workspace. ``..`` that leaves it, absolute paths, ``~``, NUL bytes
and symlinks whose real target lies outside are refused before any I/O; the real path is
resolved at the moment of use, not once at start. Gateway state (the data directory and
``config.toml``) is refused even when it happens to sit inside the workspace.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.protected import Protected, refusal

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")

ATTACHMENTS = "attachments"  # where channels store the files people send


def _never() -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Locked:
    """A path a turn may not write, for the exec sandbox to bind read-only. ``strict``: the
    turn must not run commands at all if it cannot be kept read-only (a symbolic link)."""

    path: Path
    directory: bool
    strict: bool = True


class PathDenied(Exception):
    """A path that tools may not touch. The message is safe to show the model."""


class Workspace:
    """A view of the workspace: what a turn's file tools may read and write.

    ``restricted`` paths (gateway state, other agents) are always off limits. ``hidden`` paths
    are off limits to this conversation except for reading what lies under ``allowed`` (an
    attachment sent in it, say). ``protected`` files (:mod:`agent.protected`) can be read;
    they are written only when their rule and ``owner_writes`` (asked at the moment of the
    write: the turn's taint can change) allow it. Files under ``untrusted`` came from
    outside or were written by others (attachments, other people's and groups' memory),
    so reading them taints the turn, unless they lie under what this view trusts (a
    person's own memory, in their own turns).
    """

    def __init__(
        self,
        root: Path,
        *,
        restricted: Sequence[Path] = (),
        protected: Sequence[Protected] = (),
        hidden: Sequence[Path] = (),
        hidden_folders: Sequence[Path] = (),
        allowed: Sequence[Path] = (),
        untrusted: Sequence[Path] = (),
        owner_writes: Callable[[], bool] = _never,
    ) -> None:
        self.root = root.expanduser().resolve()
        self._restricted = tuple(p.expanduser().resolve() for p in restricted)
        self._hidden = tuple(p.expanduser().resolve() for p in hidden)
        self._hidden_folders = frozenset(p.expanduser().resolve() for p in hidden_folders)
        self._protected = tuple(protected)
        self._allowed = tuple(p.expanduser().resolve() for p in allowed)
        self._untrusted = tuple(p.expanduser().resolve() for p in untrusted)
        self._trusted: tuple[Path, ...] = ()
        self._owner_writes = owner_writes
        # A turn that loaded a skill: only these paths, and these folders to read (confined).
        self._confined: tuple[Path, ...] | None = None
        self._confined_reads: tuple[Path, ...] = ()
        self._confined_by = ""

    def narrowed(self, *, hide: Sequence[str], allow: Sequence[Path] = ()) -> Workspace:
        """The same workspace with more paths (relative to the root: ``"."`` for all of it, a
        trailing ``/`` for a folder) off limits, except for reading what lies under ``allow``."""
        # A copy, not a new Workspace: the paths this one holds are resolved already, and
        # resolving them again for every turn cost more than the rest of the turn's setup.
        hidden = [Path(os.path.realpath(self.root / h)) for h in hide]
        folders = [path for path, h in zip(hidden, hide, strict=True) if h.endswith(("/", "."))]
        view = copy.copy(self)
        view._hidden = (*self._hidden, *hidden)
        view._hidden_folders = self._hidden_folders | frozenset(folders)
        view._allowed = (*self._allowed, *(p.expanduser().resolve() for p in allow))
        return view

    def trusting(self, path: str) -> Workspace:
        """The same view with ``path`` (relative to the root) not outside content though it
        lies under an untrusted folder: a person's own memory folder in their own turn."""
        view = copy.copy(self)
        view._trusted = (*self._trusted, Path(os.path.realpath(self.root / path)))
        return view

    def confined(self, paths: Sequence[str], *, reads: Sequence[Path], by: str) -> Workspace:
        """This view narrowed to ``paths`` (relative to the root), plus reading ``reads``:
        what a turn keeps once it loaded a skill (``by`` names the skills, for refusals).
        Whatever this view refused stays refused."""
        view = copy.copy(self)
        view._confined = tuple(Path(os.path.realpath(self.root / p)) for p in paths)
        view._confined_reads = tuple(Path(os.path.realpath(r)) for r in reads)
        view._confined_by = by
        return view

    def for_turn(self, owner_writes: Callable[[], bool]) -> Workspace:
        """This view for one turn: ``owner_writes`` says, at each write, whether the turn may
        change the owner's protected files (:func:`agent.protected.may_change_owner_files`)."""
        view = copy.copy(self)
        view._owner_writes = owner_writes
        return view

    def resolve(self, user_path: str, *, write: bool = False, listing: bool = False) -> Path:
        """The real path for ``user_path`` inside the workspace, or :class:`PathDenied`.
        With ``listing``, a hidden folder on the way to an allowed path may be listed too
        (only what :meth:`shows` is then listed)."""
        if "\x00" in user_path:
            raise PathDenied("path contains a NUL byte")
        cleaned = user_path.strip() or "."
        if cleaned.startswith("~"):
            raise PathDenied(
                f"{user_path!r}: home-directory paths are not allowed; use a path inside the workspace"
            )
        if cleaned.startswith(("/", "\\")) or _DRIVE.match(cleaned):
            raise PathDenied(
                f"{user_path!r}: absolute paths are not allowed; use a path relative to the workspace"
            )
        real = Path(os.path.realpath(self.root / cleaned))
        if real != self.root and not real.is_relative_to(self.root):
            raise PathDenied(f"{user_path!r} is outside the workspace")
        if _under(real, self._restricted) or (
            _under(real, self._hidden)
            and (write or not (_under(real, self._allowed) or (listing and self._leads_in(real))))
        ):
            raise PathDenied(f"{user_path!r} is not accessible from this conversation")
        if self._confined is not None and not self._within_confinement(real, write, listing):
            raise PathDenied(
                f"{user_path!r} is outside what this turn may use: it loaded {self._confined_by}"
            )
        if write:
            rule = self.protection(real)
            if rule is not None and not (rule.owner_may_change and self._owner_writes()):
                raise PathDenied(refusal(rule, user_path))
        return real

    def shows(self, path: Path) -> bool:
        """Whether a folder listing shows ``path``: what this conversation may open, and the
        folders on the way to it (a member sees ``attachments/`` leading to their own file,
        not the files next to it)."""
        real = Path(os.path.realpath(path))
        if _under(real, self._restricted):
            return False
        if self._confined is not None and not self._within_confinement(real, False, True):
            return False
        return not _under(real, self._hidden) or _under(real, self._allowed) or self._leads_in(real)

    def _within_confinement(self, real: Path, write: bool, listing: bool) -> bool:
        confined = self._confined or ()
        if _under(real, confined) or (not write and _under(real, self._confined_reads)):
            return True
        return listing and any(p.is_relative_to(real) for p in (*confined, *self._confined_reads))

    def _leads_in(self, folder: Path) -> bool:
        return any(allowed.is_relative_to(folder) for allowed in self._allowed)

    def protection(self, path: Path) -> Protected | None:
        """The protected file (or folder) ``path`` is, or lies in; names compare without
        case, so ``heartbeat.md`` on a case-insensitive disk is ``HEARTBEAT.md``."""
        try:
            parts = [p.casefold() for p in path.relative_to(self.root).parts]
        except ValueError:
            return None
        for rule in self._protected:
            wanted = [p.casefold() for p in Path(rule.path).parts]
            if parts[: len(wanted)] == wanted:
                return rule
        return None

    def locked(self) -> tuple[Locked, ...]:
        """What this turn may not write, for the exec sandbox to bind read-only: the
        protected files it may not change. What is hidden from it is :meth:`covered`."""
        owner = self._owner_writes()
        return tuple(
            Locked(self.root / rule.path, rule.directory, strict=not owner)
            for rule in self._protected
            if not (rule.owner_may_change and owner)
        )

    def covered(self) -> tuple[Path, ...]:
        """What is hidden from this conversation inside the workspace (all of it for a
        member or a group, the owner's memory for an admin): the exec sandbox covers it
        with an empty read-only folder or file, so a command sees what the file tools see."""
        if self._confined is not None:
            return (self.root,)
        return tuple(p for p in self._hidden if p == self.root or p.is_relative_to(self.root))

    def uncovered(self) -> tuple[Path, ...]:
        """What this conversation may still read under a covered path (installed skills,
        the files sent in it): shown again, read-only, over the cover."""
        covered = self.covered()
        shown = self._allowed
        if self._confined is not None:  # what the skill may use, and what this view allows
            shown = tuple(
                p
                for p in (*self._confined, *self._confined_reads)
                if not _under(p, self._hidden) or _under(p, self._allowed)
            )
        return tuple(p for p in shown if _under(p, covered) and p.exists())

    def reach(self) -> tuple[str, str]:
        """What a command of this conversation could read and write, in words for the
        approver: ``(reads, writes)``."""
        covered = self.covered()
        if not covered:
            return "the whole workspace", "the whole workspace (not the protected files)"
        if self.root in covered:
            shown = [self.relative(p) + ("/" if p.is_dir() else "") for p in self.uncovered()]
            reads = ", ".join(shown) if shown else "nothing of the workspace"
            return reads, "nothing that stays (a private /tmp, discarded afterwards)"
        hidden = ", ".join(self.relative(p) + ("/" if p.is_dir() else "") for p in covered)
        return (
            f"the workspace except {hidden}",
            f"the workspace except {hidden} and the protected files",
        )

    def is_untrusted(self, path: Path) -> bool:
        """True for files that came from outside or that others wrote (attachments people
        sent, other people's and groups' memory)."""
        return _under(path, self._untrusted) and not _under(path, self._trusted)

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)

    def open_flags(self, base: int) -> int:
        """Flags for ``os.open`` that refuse a symlink swapped in after :meth:`resolve`."""
        return base | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)
