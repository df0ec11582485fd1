"""Writing files so that a crash never leaves half a file behind, and no one else reads them."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes | str, *, mode: int | None = None) -> None:
    """Write through a temporary file in the same folder, fsync, then rename over ``path``.

    Readers see the old file or the new one, never a mix; a rename replaces a symlink at
    ``path`` instead of following it.
    """
    private_folders(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def private_folders(folder: Path) -> None:
    """Make ``folder`` and its missing parents, each readable by this user only (0700):
    ``mkdir -p`` would give the parents the umask's mode (0755, as a rule), and memory,
    notes and the store are no one else's to list."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile (another turn, node)
            each.mkdir(mode=0o700)
