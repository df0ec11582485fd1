"""Where the gateway listens for terminal chats: ``data_dir/chat.sock``.

A Unix socket path may hold at most ~107 bytes; a deeper data directory is reached through
``/proc/self/fd`` (Linux), which resolves to the same file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

SOCKET_NAME = "chat.sock"
MAX_PATH = 100


def socket_path(data_dir: Path) -> Path:
    return data_dir / SOCKET_NAME


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for ``path`` short enough to bind or connect to, valid inside the block."""
    if len(os.fsencode(path)) < MAX_PATH or not Path("/proc/self/fd").is_dir():
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)
