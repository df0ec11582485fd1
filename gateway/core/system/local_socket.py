"""Unix sockets in the data directory: the command line's way into the running gateway.

The web API (for ``switchboard status``, ``web --sign-out-all``) and the terminal chat each
listen on a socket in ``data/`` (mode 0700), made 0600. Who connects is told by the kernel
(``SO_PEERCRED``, fixed when the connection is made, whatever happens to it later), never
guessed from an address: only the gateway's own user (or root) gets in. Sandboxes never see
the data directory, so they cannot connect at all.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

MAX_PATH = 100  # a socket's path may hold at most ~107 bytes


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name for ``path`` short enough to bind or connect to, valid inside the block: a
    deeper data directory is reached through ``/proc/self/fd`` (Linux), the same file."""
    if len(os.fsencode(path)) < MAX_PATH or not Path("/proc/self/fd").is_dir():
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux); None where the OS
    cannot tell."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None or sock.family != socket.AF_UNIX:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return int(uid)


def is_gateway_user(uid: int | None) -> bool:
    """Whether ``uid`` may use the gateway's sockets: its own user, or root."""
    return uid is not None and uid in (os.geteuid(), 0)
