"""Keeping sandboxed programs that have a network away from the gateway's own ports.

``tools.exec.network = true`` and MCP servers (network on by default) share the host's
network, loopback included. Inside bubblewrap they are root of their own user namespace,
which the host sees as the gateway's own uid, so the web server could not tell them from
the owner by the connecting socket's owner (:mod:`gateway.web.peer`). They must not reach
its ports at all: the program starts under a Landlock ruleset (Linux 6.7+, Landlock ABI 4)
that allows a TCP ``connect`` to every port but the gateway's (the web server, a Telegram
webhook or Slack listener). Landlock has no "deny" rule, so the ruleset lists the 65,533
other ports; building it takes a few hundred milliseconds of a start, paid only by
programs that have a network (an MCP server once, a networked ``exec`` per command). The
restriction is inherited by every child and cannot be lifted from inside.

The wrapper is a small ``python3 -I -S -c`` program (no import of this project: the
interpreter itself, no site packages) that builds the ruleset, restricts itself and
``exec``s the real command line. Where Landlock cannot restrict TCP (an older kernel), the
guard is not :attr:`PortGuard.available`; the web server then recognises nobody by the
socket's owner and the owner signs in with ``switchboard web`` (docs/security.md).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable, Iterable, Sequence

LANDLOCK_CREATE_RULESET = 444
LANDLOCK_CREATE_RULESET_VERSION = 1
NET_ABI = 4  # the first Landlock ABI that restricts TCP connect by port

# Run as `python3 -I -S -c GUARD "8787,8443" command...`: restrict, then become the command.
GUARD = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
CONNECT_TCP = 2
deny = {int(p) for p in sys.argv[1].split(",") if p}
attr = ctypes.create_string_buffer(struct.pack("QQ", 0, CONNECT_TCP))
fd = libc.syscall(444, attr, 16, 0)
if fd < 0:
    sys.exit("switchboard port guard: landlock_create_ruleset failed: errno %d" % ctypes.get_errno())
rule = ctypes.create_string_buffer(16)
add = libc.syscall
for port in range(0, 65536):
    if port in deny:
        continue
    struct.pack_into("QQ", rule, 0, CONNECT_TCP, port)
    if add(445, fd, 2, rule, 0) != 0:
        sys.exit("switchboard port guard: landlock_add_rule failed: errno %d" % ctypes.get_errno())
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.syscall(446, fd, 0) != 0:
    sys.exit("switchboard port guard: landlock_restrict_self failed: errno %d" % ctypes.get_errno())
os.close(fd)
os.execvp(sys.argv[2], sys.argv[2:])
"""


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 without Landlock."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = int(
            libc.syscall(LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


class PortGuard:
    """Which ports a networked sandbox may not connect to, and the wrapper that enforces it.

    ``ports`` is asked at each start, so a port the web server got after this guard was
    made (``web.port = 0``) is included from then on."""

    def __init__(self, ports: Callable[[], Iterable[int]], *, python: str = sys.executable) -> None:
        self._ports = ports
        self._python = python

    @property
    def available(self) -> bool:
        return sys.platform == "linux" and landlock_abi() >= NET_ABI

    def denied(self) -> frozenset[int]:
        return frozenset(port for port in self._ports() if 0 < port < 65_536)

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` started under the guard; unchanged where Landlock cannot do it."""
        ports = self.denied()
        if not self.available or not ports:
            return list(command)
        listed = ",".join(str(port) for port in sorted(ports))
        return [os.path.realpath(self._python), "-I", "-S", "-c", GUARD, listed, *command]
