"""The terminal chat: ``switchboard chat`` in-process, or attached to a running gateway.

See :mod:`channels.terminal.channel` (the channel), :mod:`.server` (the local socket that
attached windows use) and :mod:`.frames` (what travels between them).
"""

from __future__ import annotations

from channels.terminal.address import socket_path
from channels.terminal.channel import CHAT_ID, NAME, TerminalChannel
from channels.terminal.frames import Viewer

__all__ = ["CHAT_ID", "NAME", "TerminalChannel", "Viewer", "socket_path"]
