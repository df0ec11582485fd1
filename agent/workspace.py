"""The agent's workspace and the only way tools turn a path into a file.

Paths are relative to the workspace. ``..`` that leaves it, absolute paths, ``~``, NUL bytes
and symlinks whose real target lies outside are refused before any I/O; the real path is
resolved at the moment of use, not once at start. Gateway state (the data directory and
``config.toml``) is refused even when it happens to sit inside the workspace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")

# Who the assistant is and what it may do: the owner's to edit, read-only to file tools.
PERSONA_FILES = ("AGENTS.md", "SOUL.md", "IDENTITY.md", "TOOLS.md")
ATTACHMENTS = "attachments"  # where channels store the files people send


class PathDenied(Exception):
    """A path that tools may not touch. The message is safe to show the model."""


class Workspace:
    """A view of the workspace: what a turn's file tools may read and write.

    ``restricted`` paths (gateway state, other agents) are always off limits. ``hidden`` paths
    are off limits to this conversation except for reading what lies under ``allowed`` (an
    attachment sent in it, say). ``read_only`` paths can be read but not written. Files under
    ``untrusted`` came from outside, so reading them taints the turn.
    """

    def __init__(
        self,
        root: Path,
        *,
        restricted: Sequence[Path] = (),
        read_only: Sequence[Path] = (),
        hidden: Sequence[Path] = (),
        allowed: Sequence[Path] = (),
        untrusted: Sequence[Path] = (),
    ) -> None:
        self.root = root.expanduser().resolve()
        self._restricted = tuple(p.expanduser().resolve() for p in restricted)
        self._hidden = tuple(p.expanduser().resolve() for p in hidden)
        self._read_only = tuple(p.expanduser().resolve() for p in read_only)
        self._allowed = tuple(p.expanduser().resolve() for p in allowed)
        self._untrusted = tuple(p.expanduser().resolve() for p in untrusted)

    def narrowed(self, *, hide: Sequence[str], allow: Sequence[Path] = ()) -> Workspace:
        """The same workspace with more paths (relative to the root, ``"."`` for all of it)
        off limits, except for reading what lies under ``allow``."""
        return Workspace(
            self.root,
            restricted=self._restricted,
            hidden=(*self._hidden, *(Path(os.path.realpath(self.root / h)) for h in hide)),
            read_only=self._read_only,
            allowed=(*self._allowed, *allow),
            untrusted=self._untrusted,
        )

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
        if write and _under(real, self._read_only):
            raise PathDenied(f"{user_path!r} is read-only: the owner edits it, not the assistant")
        return real

    def shows(self, path: Path) -> bool:
        """Whether a folder listing shows ``path``: what this conversation may open, and the
        folders on the way to it (a member sees ``attachments/`` leading to their own file,
        not the files next to it)."""
        real = Path(os.path.realpath(path))
        if _under(real, self._restricted):
            return False
        return not _under(real, self._hidden) or _under(real, self._allowed) or self._leads_in(real)

    def _leads_in(self, folder: Path) -> bool:
        return any(allowed.is_relative_to(folder) for allowed in self._allowed)

    def is_untrusted(self, path: Path) -> bool:
        """True for files that came from outside (attachments people sent)."""
        return _under(path, self._untrusted)

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
