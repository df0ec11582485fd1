"""Where the gateway listens for terminal chats: ``data_dir/chat.sock`` (reached through
:func:`gateway.core.system.local_socket.reachable` when the path is long)."""

from __future__ import annotations

from pathlib import Path

SOCKET_NAME = "chat.sock"


def socket_path(data_dir: Path) -> Path:
    return data_dir / SOCKET_NAME
