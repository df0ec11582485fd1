"""How many connections the gateway's HTTP servers hold, and for how long.

Every open connection is a file descriptor, and the gateway needs descriptors of its own:
the model calls, the platforms' connections, the store, the files of a turn. A client that
opens connections and never finishes a request (sends half a request head and waits, or
nothing at all) used to keep each one forever; ten thousand of them took every descriptor,
and the gateway could answer nobody (model calls failed with "too many open files"). So
every HTTP server the gateway runs (the web server, Slack's Events API, Telegram's
webhook; :mod:`gateway.core.system.http_sites`) accepts through :class:`Admission`:

- a connection that has not sent a whole request head ``head_seconds`` after it opened is
  closed. Between requests on a kept-alive connection aiohttp's own keep-alive timeout,
  set to the same seconds, closes it (an idle one, or one that began a request and
  stalled). What a request does once its head is in (an upload, a WebSocket, an event
  stream) is the handler's, and not limited here;
- at most ``per_server`` connections are open at once, and at most ``per_client`` from one
  client address (an IPv6 client by its /64, which one machine usually has whole); more are
  answered ``503`` and closed at once. ``per_server`` is also kept under a quarter of the
  process's open-file limit, so the servers together cannot take what the rest needs.

This is plain asyncio (a protocol in front of the server's protocol): aiohttp has no
timeout for a request's head (its newest releases close a connection idle from the start,
older ones never do) and no cap on connections. :func:`raise_open_files_limit` lifts the
process's soft limit on open files to the hard one at start, as servers do.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 32\r\n"
    b"Retry-After: 5\r\n"
    b"Connection: close\r\n"
    b"\r\n"
    b"too many connections; try again\n"
)
HEAD_ENDS = (b"\r\n\r\n", b"\n\n")
LOCAL = "local"  # a Unix socket's clients: the gateway's own user (0600, in a 0700 folder)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """``[limits]`` ``http_*`` (docs/security.md#limits)."""

    head_seconds: float = 10.0
    per_server: int = 512
    per_client: int = 64


def open_files_limit() -> int:
    """The process's (soft) limit on open files."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def raise_open_files_limit() -> int:
    """Lift the soft limit on open files to the hard one (the soft one is often 1,024
    while the system allows far more); the limit now in force. A limit that cannot be
    raised (a container's policy) stays as it is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:  # RLIM_INFINITY refused (macOS), or a policy
            log.debug("the open-files limit stays at %d: %s", soft, exc)
    return open_files_limit()


def client_of(peer: object) -> str:
    """Whose connection it is, for ``per_client``: the IP address (an IPv6 one by its
    /64); a Unix socket's peer (no address) is :data:`LOCAL`."""
    if not isinstance(peer, tuple) or not peer or not isinstance(peer[0], str):
        return LOCAL
    try:
        address = ipaddress.ip_address(peer[0].partition("%")[0])
    except ValueError:
        return peer[0]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # an IPv4 client of a dual-stack socket
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class Admission:
    """The connections one server holds: who may open another, and the deadline of each
    (see the module docstring). ``server``: its name in the log."""

    def __init__(self, limits: ConnectionLimits, server: str) -> None:
        self.limits = limits
        self.server = server
        self.per_server = max(8, min(limits.per_server, open_files_limit() // 4))
        self.open: Counter[str] = Counter()  # client -> connections open

    @property
    def total(self) -> int:
        return sum(self.open.values())

    def wrap(self, factory: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for ``loop.create_server``: ``factory``'s protocol behind
        these limits."""
        return lambda: Guarded(factory(), self)

    def admit(self, client: str) -> bool:
        if self.total >= self.per_server:
            log.warning(
                "%s: refused a connection: %d are open, the most it holds "
                "(limits.http_connections, and a quarter of the open-files limit)",
                self.server,
                self.per_server,
            )
            return False
        if self.open[client] >= self.limits.per_client:
            log.warning(
                "%s: refused a connection from %s: %d are open from there "
                "(limits.http_connections_per_client)",
                self.server,
                client,
                self.limits.per_client,
            )
            return False
        self.open[client] += 1
        return True

    def release(self, client: str) -> None:
        self.open[client] -= 1
        if self.open[client] <= 0:
            del self.open[client]


class Guarded(asyncio.Protocol):
    """One connection: admitted or refused, then closed unless its request head is whole
    within the deadline; everything else is the inner (aiohttp's) protocol's."""

    def __init__(self, inner: asyncio.Protocol, admission: Admission) -> None:
        self._inner = inner
        self._admission = admission
        self._client: str | None = None  # set once admitted
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._tail = b""  # the last bytes of the head so far: its end may span two reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        client = client_of(transport.get_extra_info("peername"))
        if not self._admission.admit(client):
            transport.write(BUSY)
            transport.close()
            return
        self._client = client
        self._transport = transport
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self._admission.limits.head_seconds, self._too_slow)
        self._inner.connection_made(transport)

    def _too_slow(self) -> None:
        """No whole request head in time: closed without an answer (a slow or idle client
        has nothing to read one)."""
        self._deadline = None
        if self._transport is not None:
            log.debug("%s: closed a connection without a request in time", self._admission.server)
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._client is None:
            return  # refused: its bytes are not read
        if self._deadline is not None:
            seen = self._tail + data
            if any(end in seen for end in HEAD_ENDS):
                self._deadline.cancel()
                self._deadline = None
                self._tail = b""
            else:
                self._tail = seen[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._client is not None else None

    def pause_writing(self) -> None:
        if self._client is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._client is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._client is None:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._admission.release(self._client)
        self._client = None
        self._transport = None
        self._inner.connection_lost(exc)
