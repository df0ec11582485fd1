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


class PathDenied(Exception):
    """A path that tools may not touch. The message is safe to show the model."""


class Workspace:
    def __init__(
        self, root: Path, *, restricted: Sequence[Path] = (), read_only: Sequence[Path] = ()
    ) -> None:
        self.root = root.expanduser().resolve()
        self._restricted = tuple(p.expanduser().resolve() for p in restricted)
        self._read_only = tuple(p.expanduser().resolve() for p in read_only)

    def narrowed(self, *, hide: Sequence[str]) -> Workspace:
        """The same workspace with more paths (relative to the root) off limits."""
        view = Workspace(self.root, read_only=self._read_only)
        view._restricted = (
            *self._restricted,
            *(Path(os.path.realpath(self.root / h)) for h in hide),
        )
        return view

    def resolve(self, user_path: str, *, write: bool = False) -> Path:
        """The real path for ``user_path`` inside the workspace, or :class:`PathDenied`."""
        if "\x00" in user_path:
            raise PathDenied("path contains a NUL byte")
        cleaned = user_path.strip()
        if cleaned in ("", "."):
            return self.root
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
        for restricted in self._restricted:
            if real == restricted or real.is_relative_to(restricted):
                raise PathDenied(f"{user_path!r} is not accessible from this conversation")
        if write:
            for protected in self._read_only:
                if real == protected or real.is_relative_to(protected):
                    raise PathDenied(
                        f"{user_path!r} is read-only (skills are installed by the owner)"
                    )
        return real

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)

    def open_flags(self, base: int) -> int:
        """Flags for ``os.open`` that refuse a symlink swapped in after :meth:`resolve`."""
        return base | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
