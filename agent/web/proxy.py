"""The browser's only way out: a forward proxy on 127.0.0.1 that applies the SSRF guard.

Chromium sends every request of a rendered page here (``--proxy-server``, with loopback
included, see :mod:`agent.web.chromium`): plain HTTP in absolute form, HTTPS and WebSockets
as ``CONNECT`` tunnels. For each one the proxy judges the target the way
:class:`~agent.web.ssrf.Guard` judges a plain fetch (IP literals in any spelling, internal
names, every DNS answer), resolves a name **once** and connects to exactly the address it
checked, so a second, different DNS answer (rebinding) is never used. Redirects, frames,
images, scripts' ``fetch`` and WebSockets are all new requests and pass the same check.

One proxy serves one fetch: it counts the bytes the page moves and cuts every connection
when the fetch's byte budget is spent, and its refusals tell the renderer why a page
failed. Plain HTTP requests are sent upstream with ``Connection: close`` so that every
request on a keep-alive connection from the browser is judged on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from yarl import URL

from agent.web.ssrf import BlockedTarget, Guard, IPAddress, normalise_host, parse_ip

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT = 10.0
# Connections from the browser (or a skill's script) open at once: Chromium opens at most
# 32 to a proxy. A client past it is cut off, not queued: each one is a file descriptor
# of the gateway's.
MAX_CONNECTIONS = 64
CONNECT_TIMEOUT = 10.0
READ_SIZE = 64 * 1024
REFUSED_HEADER = "X-Switchboard-Refused"
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}
)


@dataclass(slots=True)
class Traffic:
    """What one fetch's page did through the proxy."""

    max_bytes: int
    bytes: int = 0  # both directions, headers included
    connections: int = 0
    refusals: list[str] = field(default_factory=list)  # "host is <reason>", in order

    @property
    def exhausted(self) -> bool:
        return self.bytes >= self.max_bytes


class GuardedProxy:
    """``async with GuardedProxy(guard, max_bytes=...) as proxy:`` then use ``proxy.server``."""

    def __init__(
        self, guard: Guard, *, max_bytes: int, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        self.guard = guard
        self.max_connections = max_connections
        self.traffic = Traffic(max_bytes)
        self.cut = asyncio.Event()  # set when the byte budget is spent and traffic was cut
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    def renew(self) -> None:
        """A fresh byte budget: the browser tool's sessions keep one proxy, with a budget per step."""
        self.traffic = Traffic(self.traffic.max_bytes)
        self.cut.clear()

    @property
    def server(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> GuardedProxy:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", 0, limit=MAX_HEAD_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def start_unix(self, path: str) -> GuardedProxy:
        """Serve on a Unix socket instead: the only way out of a sandbox without a network
        (a skill's script, :mod:`agent.skills.egress`)."""
        self._server = await asyncio.start_unix_server(self._accept, path, limit=MAX_HEAD_BYTES)
        return self

    async def stop(self) -> None:
        """Close the listener and every connection still open (the fetch is over)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        self._cut_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def __aenter__(self) -> GuardedProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- one connection from the browser ------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._tasks) >= self.max_connections:
            log.debug("the guarded proxy refused a connection: %d are open", len(self._tasks))
            _close(writer)
            return
        # A task of our own (not the server's callback task), so stop() may cancel it.
        task = asyncio.create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the browser went away or sent garbage; nothing to answer
        finally:
            self._writers.discard(writer)
            _close(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")
        if self.traffic.exhausted:
            await _answer(writer, 403, "the page used up its byte budget", refused=True)
            return
        if not self._spend(len(head)):
            return
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = request_line.split(" ")
        except ValueError:
            await _answer(writer, 400, "malformed request line")
            return
        if method.upper() == "CONNECT":
            host, port = split_authority(target)
            upstream = await self._open_or_refuse(writer, host, port)
            if upstream is None:
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await self._relay(reader, writer, *upstream)
            return
        url = URL(target) if target.startswith(("http://", "HTTP://")) else None
        if url is None or url.raw_host is None:
            await _answer(writer, 400, "only absolute http:// URLs and CONNECT are proxied")
            return
        if url.user is not None or url.password is not None:
            await _answer(writer, 403, "URLs with credentials are not fetched", refused=True)
            return
        upstream = await self._open_or_refuse(writer, url.raw_host, url.port or 80)
        if upstream is None:
            return
        upstream[1].write(_origin_form(method, url, version, header_lines))
        await self._relay(reader, writer, *upstream)

    async def _open_or_refuse(
        self, writer: asyncio.StreamWriter, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            return await self.open(host, port)
        except BlockedTarget as exc:
            self.traffic.refusals.append(str(exc))
            await _answer(writer, 403, f"refused: {exc}", refused=True)
        except (OSError, TimeoutError) as exc:
            await _answer(writer, 502, f"could not connect to {host}: {exc}")
        return None

    async def open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to ``host``: judged, resolved once, connected to a checked address."""
        if self.traffic.exhausted:
            raise BlockedTarget(f"{host} was not contacted: the page used up its byte budget")
        addresses = await self.checked_addresses(host, port)
        last: Exception = OSError(f"{host} has no address")
        for ip in addresses:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    connection = await asyncio.open_connection(str(ip), port)
            except (OSError, TimeoutError) as exc:
                last = exc
                continue
            self.traffic.connections += 1
            self._writers.add(connection[1])
            return connection
        raise last

    async def checked_addresses(self, host: str, port: int) -> list[IPAddress]:
        """The addresses the proxy may connect to for ``host``; BlockedTarget if any is not
        allowed (a name answering one public and one private address is refused whole)."""
        name = normalise_host(host)
        if not name:
            raise BlockedTarget("the request has no host")
        self.guard.check_bounds(name)
        literal = parse_ip(name)
        if literal is not None:
            self.guard.check_address(literal, name)
            return [literal]
        refusal = self.guard.policy.name_refusal(name)
        if refusal is not None:
            raise self.guard.refuse(name, refusal)
        addresses = await self.guard.resolve(name, port)
        if not self.guard.policy.name_allowed(name):
            for ip in addresses:
                self.guard.check_address(ip, name)
        return addresses

    # -- moving bytes -------------------------------------------------------------------

    async def _relay(
        self,
        client_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        upstream_reader: asyncio.StreamReader,
        upstream_writer: asyncio.StreamWriter,
    ) -> None:
        """Move bytes both ways until the upstream side is done (the answer is complete)."""
        outgoing = asyncio.create_task(self._pump(client_reader, upstream_writer))
        try:
            await self._pump(upstream_reader, client_writer)
        finally:
            outgoing.cancel()
            await asyncio.gather(outgoing, return_exceptions=True)
            self._writers.discard(upstream_writer)
            _close(upstream_writer)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(READ_SIZE):
                if not self._spend(len(data)):
                    return
                sink.write(data)
                await sink.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                if sink.can_write_eof():
                    sink.write_eof()

    def _spend(self, size: int) -> bool:
        """Count ``size`` bytes; when the budget is gone, cut every connection of the fetch."""
        self.traffic.bytes += size
        if not self.traffic.exhausted:
            return True
        log.debug("a rendered page reached its byte budget of %d", self.traffic.max_bytes)
        self.cut.set()
        self._cut_all()
        return False

    def _cut_all(self) -> None:
        for writer in list(self._writers):
            _close(writer)
        self._writers.clear()


def split_authority(target: str) -> tuple[str, int]:
    """``host:port`` of a CONNECT request (``[v6]:port`` too); port 443 when absent."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or (host.count(":") and not host.endswith("]")):
        return target, 443
    return host, int(port)


def _origin_form(method: str, url: URL, version: str, header_lines: list[str]) -> bytes:
    """The request as the origin server expects it: path only, no proxy or hop headers."""
    lines = [f"{method} {url.raw_path_qs or '/'} {version}"]
    for line in header_lines:
        name = line.split(":", 1)[0].strip().lower()
        if line and name not in _HOP_HEADERS:
            lines.append(line)
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _answer(
    writer: asyncio.StreamWriter, status: int, reason: str, *, refused: bool = False
) -> None:
    body = reason.encode("utf-8", "replace")
    mark = f"{REFUSED_HEADER}: 1\r\n" if refused else ""
    head = (
        f"HTTP/1.1 {status} {'Forbidden' if status == 403 else 'Error'}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        f"{mark}Connection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        writer.write(head.encode("latin-1") + body)
        await writer.drain()


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()
