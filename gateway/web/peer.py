"""Whose process is at the other end of a loopback TCP connection.

Linux lists every TCP socket of the network namespace in ``/proc/net/tcp`` and
``/proc/net/tcp6`` with the uid that created it. The connecting client's socket is the one
whose local address is the request's peer and whose remote address is our socket. Another
user's program cannot make a socket under our uid; a program inside our sandboxes can (its
user namespace maps to our uid), which is why those cannot connect to our ports at all
(:mod:`gateway.core.portguard`). Nothing found, or anything unreadable: ``None``, and the
caller treats the client as a stranger.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))

Address = tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]


def peer_uid(peer: object, local: object, *, tables: tuple[Path, ...] = TABLES) -> int | None:
    """The uid owning the client socket of the connection ``peer`` -> ``local`` (each the
    transport's ``(host, port, ...)``), or ``None``."""
    client, server = _address(peer), _address(local)
    if client is None or server is None:
        return None
    for table in tables:
        try:
            lines = table.read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8:
                continue
            if _parse(fields[1]) == client and _parse(fields[2]) == server:
                try:
                    return int(fields[7])
                except ValueError:
                    return None
    return None


def _address(value: object) -> Address | None:
    if not isinstance(value, tuple) or len(value) < 2:
        return None
    try:
        return _plain(ipaddress.ip_address(str(value[0]).split("%")[0])), int(value[1])
    except ValueError:
        return None


def _plain(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _parse(field: str) -> Address | None:
    """``0100007F:1F90`` -> (127.0.0.1, 8080): the address is in the kernel's byte order
    (little-endian 32-bit words), the port in hex."""
    host, _, port = field.partition(":")
    try:
        raw = bytes.fromhex(host)
        words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
        if len(words) == 4:
            return ipaddress.IPv4Address(words), int(port, 16)
        if len(words) == 16:
            return _plain(ipaddress.IPv6Address(words)), int(port, 16)
    except ValueError:
        return None
    return None
