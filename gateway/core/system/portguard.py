"""Keeping sandboxed programs that have a network away from the gateway's own sockets.

``tools.exec.network = true`` and MCP servers (network on by default) share the host's
network, loopback included. Nobody is the owner by where a connection comes from (the web
server wants a secret it issued: docs/security.md), but the gateway's ports are still no
business of a sandboxed program, so it must not reach them by any protocol. Two kernel
features do it together, both inherited by every child and impossible to lift from inside:

* a **Landlock** ruleset (Linux 6.7+, ABI 4) that allows a TCP ``connect`` to every port but
  the gateway's (the web server, a Telegram webhook or Slack listener). Landlock has no
  "deny" rule, so the ruleset lists the other ports: building it takes a few hundred
  milliseconds, paid only by programs that have a network (an MCP server once, a networked
  ``exec`` per command);
* a **seccomp** filter that lets ``socket()`` make only what the port rule covers or what
  cannot reach a TCP port: TCP and UDP (and ping) over IPv4 and IPv6, Unix and netlink
  sockets. Anything else (MPTCP, SCTP, raw, packet, vsock, ...) fails with
  ``EPROTONOSUPPORT``/``EAFNOSUPPORT``: MPTCP, for one, is a TCP connection to the kernel's
  listener that Landlock's TCP rule does not see. ``io_uring`` is refused too (it can make
  sockets without the ``socket`` system call), and so are system calls of a foreign
  architecture (a 32-bit program's ``socketcall``).

The wrapper is a small ``python3 -I -S -c`` program (no import of this project: the
interpreter itself, no site packages) that builds the ruleset, installs the filter and
``exec``s the real command line. Where either cannot work (an older kernel, an architecture
the filter does not know), the guard is not :attr:`PortGuard.available` and networked
sandboxes are refused (:class:`NetworkUnguarded`; ``switchboard doctor`` says which
protection is active).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct
import sys
from collections.abc import Callable, Iterable, Sequence

LANDLOCK_CREATE_RULESET = 444
LANDLOCK_CREATE_RULESET_VERSION = 1
NET_ABI = 4  # the first Landlock ABI that restricts TCP connect by port

# Run as `python3 -I -S -c GUARD "8787,8443" FILTER command...`: restrict, then become the
# command. FILTER is the seccomp program (hex of struct sock_filter[]).
GUARD = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def fail(what):
    sys.exit("switchboard network guard: %s failed: errno %d" % (what, ctypes.get_errno()))
CONNECT_TCP = 2
deny = {int(p) for p in sys.argv[1].split(",") if p}
if deny:
    attr = ctypes.create_string_buffer(struct.pack("QQ", 0, CONNECT_TCP))
    fd = libc.syscall(444, attr, 16, 0)
    if fd < 0:
        fail("landlock_create_ruleset")
    rule = ctypes.create_string_buffer(16)
    add = libc.syscall
    for port in range(0, 65536):
        if port in deny:
            continue
        struct.pack_into("QQ", rule, 0, CONNECT_TCP, port)
        if add(445, fd, 2, rule, 0) != 0:
            fail("landlock_add_rule")
if libc.prctl(38, 1, 0, 0, 0) != 0:
    fail("no_new_privs")
if deny:
    if libc.syscall(446, fd, 0) != 0:
        fail("landlock_restrict_self")
    os.close(fd)
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
code = bytes.fromhex(sys.argv[2])
buffer = ctypes.create_string_buffer(code, len(code))
program = Program(len(code) // 8, ctypes.addressof(buffer))
if libc.prctl(22, 2, ctypes.byref(program), 0, 0) != 0:
    fail("seccomp")
os.execvp(sys.argv[3], sys.argv[3:])
"""

# The filter's vocabulary (linux/filter.h, linux/seccomp.h).
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0, _ARG1, _ARG2 = 0, 4, 16, 24, 32  # offsets in struct seccomp_data (low words)
_X32_BIT = 0x40000000


# Per architecture: (AUDIT_ARCH_*, socket, io_uring_setup, whether x32 numbers exist).
_ARCHES = {
    "x86_64": (0xC000003E, 41, 425, True),
    "aarch64": (0xC00000B7, 198, 425, False),
}
_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_SOCK_STREAM, _SOCK_DGRAM, _SOCK_TYPE_MASK = 1, 2, 0xF
_TCP, _UDP, _ICMP, _ICMPV6 = 6, 17, 1, 58


class NetworkUnguarded(Exception):
    """A sandbox with a network was asked for where the guard cannot work (the message
    says why and what to do)."""


def unguarded_reason() -> str | None:
    """Why networked sandboxes cannot be kept off the gateway's sockets here, or ``None``."""
    if sys.platform != "linux":
        return "keeping sandboxes off the gateway's sockets needs Linux"
    if landlock_abi() < NET_ABI:
        return (
            f"this kernel's Landlock (ABI {landlock_abi()}, {NET_ABI}+ needed: Linux 6.7) "
            "cannot keep a networked sandbox off the gateway's ports"
        )
    if socket_filter() is None:
        return f"the socket filter does not know this architecture ({platform.machine()})"
    return None


@functools.cache
def socket_filter() -> bytes | None:
    """The seccomp program (``struct sock_filter[]``) for this machine's architecture, or
    ``None`` where it is not known. See the module docstring for what it lets through."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        return None
    audit_arch, socket_nr, io_uring_nr, x32 = arch
    program = _Program()
    program.load(_ARCH)
    program.unless_equal(audit_arch, "eperm")
    program.load(_NR)
    if x32:
        program.when_at_least(_X32_BIT, "eperm")
    program.when_equal(io_uring_nr, "eperm")
    program.unless_equal(socket_nr, "allow")
    program.load(_ARG0)  # the address family
    program.when_equal(_AF_UNIX, "allow")
    program.when_equal(_AF_NETLINK, "allow")
    program.when_equal(_AF_INET, "inet")
    program.unless_equal(_AF_INET6, "no-family")
    program.label("inet")
    program.load(_ARG1)  # the socket type, without SOCK_NONBLOCK / SOCK_CLOEXEC
    program.mask(_SOCK_TYPE_MASK)
    program.when_equal(_SOCK_STREAM, "stream")
    program.unless_equal(_SOCK_DGRAM, "no-protocol")
    program.load(_ARG2)  # datagrams: UDP, or ping
    for protocol in (0, _UDP, _ICMP, _ICMPV6):
        program.when_equal(protocol, "allow")
    program.jump("no-protocol")
    program.label("stream")
    program.load(_ARG2)  # streams: TCP only (not MPTCP, not SCTP)
    program.when_equal(0, "allow")
    program.when_equal(_TCP, "allow")
    program.label("no-protocol")
    program.give(_ERRNO | errno.EPROTONOSUPPORT)
    program.label("no-family")
    program.give(_ERRNO | errno.EAFNOSUPPORT)
    program.label("eperm")
    program.give(_ERRNO | errno.EPERM)
    program.label("allow")
    program.give(_ALLOW)
    return program.assemble()


class _Program:
    """A classic BPF program with named jump targets, assembled once the labels are known.
    Each conditional jump goes to a label when its test holds and falls through otherwise."""

    def __init__(self) -> None:
        # (code, jump if true, jump if false, constant): a jump is a label or None (next)
        self._steps: list[tuple[int, str | None, str | None, int]] = []
        self._labels: dict[str, int] = {}

    def load(self, offset: int) -> None:
        self._steps.append((_LOAD_WORD, None, None, offset))

    def mask(self, bits: int) -> None:
        self._steps.append((_AND, None, None, bits))

    def when_equal(self, value: int, target: str) -> None:
        self._steps.append((_JUMP_EQUAL, target, None, value))

    def unless_equal(self, value: int, target: str) -> None:
        self._steps.append((_JUMP_EQUAL, None, target, value))

    def when_at_least(self, value: int, target: str) -> None:
        self._steps.append((_JUMP_AT_LEAST, target, None, value))

    def jump(self, target: str) -> None:
        self._steps.append((_JUMP_EQUAL, target, target, 0))

    def give(self, verdict: int) -> None:
        self._steps.append((_RETURN, None, None, verdict))

    def label(self, name: str) -> None:
        self._labels[name] = len(self._steps)

    def assemble(self) -> bytes:
        code = b""
        for index, (op, if_true, if_false, constant) in enumerate(self._steps):
            code += struct.pack(
                "<HBBI", op, self._offset(index, if_true), self._offset(index, if_false), constant
            )
        return code

    def _offset(self, index: int, label: str | None) -> int:
        if label is None:
            return 0
        distance = self._labels[label] - index - 1
        if not 0 <= distance < 256:
            raise ValueError(f"jump to {label} out of range")
        return distance


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
    """Which ports a networked sandbox may not connect to, and the wrapper that keeps it
    off them (and off every protocol the port rule cannot see).

    ``ports`` is asked at each start, so a port the web server got after this guard was
    made (``web.port = 0``) is included from then on."""

    def __init__(
        self,
        ports: Callable[[], Iterable[int]],
        *,
        python: str = sys.executable,
        unguarded: Callable[[], str | None] = unguarded_reason,
    ) -> None:
        self._ports = ports
        self._python = python
        self._unguarded = unguarded  # what the kernel cannot do here (a seam for tests)

    @property
    def available(self) -> bool:
        return self._unguarded() is None

    def denied(self) -> frozenset[int]:
        return frozenset(port for port in self._ports() if 0 < port < 65_536)

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` started under the guard.

        Raises :class:`NetworkUnguarded` where the guard cannot work: a networked sandbox
        is refused rather than started without it."""
        reason = self._unguarded()
        program = socket_filter()
        if reason is not None or program is None:
            raise NetworkUnguarded(
                f"{reason}; a sandbox with a network is refused here (turn its network off)"
            )
        listed = ",".join(str(port) for port in sorted(self.denied()))
        python = os.path.realpath(self._python)
        return [python, "-I", "-S", "-c", GUARD, listed, program.hex(), *command]
