"""One IRC connection, kept up: TLS, registration (SASL PLAIN or NickServ), PING/PONG, a
nick in use, reconnects with backoff, and paced sending with a fence.

Why our own and not a library: what the channel needs is a few hundred lines over asyncio
streams, and the libraries' parts that matter here do not fit: pydle (maintained) cuts
long messages by characters, not by the bytes the server counts, and brings its own
reconnect policy (three tries) and throttling; bottom and irc leave most of this to the
caller anyway.

Registration (capabilities, SASL, the nick) is :mod:`.registration`'s.

**Pacing.** Servers disconnect a client that sends too fast ("Excess Flood"), so every
line we send after registration takes a token from a bucket of ``flood_burst`` tokens that
refills one per ``flood_interval_seconds``: a short answer goes at once, a long one at the
pace servers expect. PONGs are never held back.

**The fence.** A line written to the socket has not necessarily reached the server. After
the lines of a message :meth:`IrcClient.deliver` sends ``PING <token>`` and waits for the
``PONG``: the server handles a client's lines in order, so the PONG says every line before
it was handled, and any refusal of them (a channel we may not write to, a nick not online)
arrived before it. A connection lost before the PONG fails the delivery, which the outbox
retries: the message may then show twice, never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable

from channels.irc.protocol import Line, casefold, format_line, parse
from channels.irc.registration import Refused, register
from channels.irc.settings import IrcSettings
from gateway.core.backoff import Backoff
from gateway.core.errors import ChannelPermanentError, ChannelTransientError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 20.0
REGISTER_TIMEOUT = 60.0  # seconds from connecting to the welcome
IDLE_SECONDS = 120.0  # no line from the server for this long: we PING it
PONG_TIMEOUT = 60.0  # ... and give up on the connection if it does not answer
NICK_RETRY_SECONDS = 60.0  # with another nick: ask for ours back this often
FENCE_TIMEOUT = 120.0  # a delivery's PONG, after its paced lines
# Numerics that refuse a message to a target (RFC 2812 and common extensions).
REFUSALS = {
    "401": "no such nick",
    "403": "no such channel",
    "404": "cannot send to channel",
    "406": "there was no such nick",
    "407": "too many targets",
    "411": "no recipient",
    "412": "no text to send",
    "442": "not on that channel",
    "477": "the channel needs a registered nick",
    "486": "the person only accepts messages from registered nicks",
    "489": "the channel needs a secure connection",
}

Handler = Callable[[Line], Awaitable[None]]
Status = Callable[[str | None], None]


class Pacer:
    """A token bucket: ``burst`` lines at once, then one per ``interval`` seconds."""

    def __init__(self, burst: int, interval: float, clock: Callable[[], float] = time.monotonic):
        self._burst = burst
        self._interval = interval
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        async with self._lock:
            while True:
                now = self._clock()
                if self._interval > 0:
                    self._tokens = min(
                        self._burst, self._tokens + (now - self._at) / self._interval
                    )
                else:
                    self._tokens = self._burst
                self._at = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) * self._interval)


class IrcClient:
    def __init__(
        self,
        settings: IrcSettings,
        on_message: Handler,
        *,
        on_status: Status,
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self._on_message = on_message
        self._on_status = on_status
        self._backoff = backoff or Backoff(base=2.0, cap=120.0)
        self._pacer = Pacer(settings.flood_burst, settings.flood_interval_seconds)
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._fences: dict[str, asyncio.Future[list[str]]] = {}
        self._refusals: list[tuple[str, str]] = []  # (target, why) since the last fence
        self._tokens = itertools.count(1)
        self._send_lock = asyncio.Lock()
        self.registered = asyncio.Event()
        self.nick = settings.nick
        self.source = settings.nick  # nick!user@host as the server shows us, once known
        self.connections = 0
        self._nick_asked = time.monotonic()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="irc-connection")

    async def stop(self) -> None:
        writer = self._writer
        if writer is not None and self.registered.is_set():
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(b"QUIT :Switchboard is stopping\r\n")
                async with asyncio.timeout(2):
                    await writer.drain()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # -- the connection -------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self._session()
                why = "the server closed the connection"
            except asyncio.CancelledError:
                raise
            except Refused as exc:
                why = str(exc)
            except (OSError, TimeoutError, ConnectionError, ssl.SSLError) as exc:
                why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self._lost()
            self._on_status(why)
            delay = self._backoff.next()
            log.warning("irc: %s; connecting again in %.1f s", why, delay)
            await asyncio.sleep(delay)

    async def _session(self) -> None:
        reader, writer = await open_connection(self.settings)
        self._writer = writer
        self.connections += 1
        try:
            async with asyncio.timeout(REGISTER_TIMEOUT):
                self.nick = self.source = await register(self.settings, reader, writer)
            self._after_registration()
            await self._read(reader)
        finally:
            self._writer = None
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _after_registration(self) -> None:
        settings = self.settings
        self.registered.set()
        self._backoff.reset()
        self._on_status(None)
        log.info("irc: connected to %s:%d as %s", *settings.address, self.nick)
        if settings.channels:
            self._write(format_line("JOIN", ",".join(settings.channels)))

    def _lost(self) -> None:
        self.registered.clear()
        for future in self._fences.values():
            if not future.done():
                future.set_exception(ChannelTransientError("the IRC connection was lost"))
        self._fences.clear()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        waiting_pong = False
        while True:
            try:
                async with asyncio.timeout(PONG_TIMEOUT if waiting_pong else IDLE_SECONDS):
                    raw = await reader.readline()
            except TimeoutError:
                if waiting_pong:
                    raise TimeoutError("the server stopped answering") from None
                self._write(format_line("PING", "switchboard"))
                waiting_pong = True
                continue
            if not raw:
                return
            waiting_pong = False
            line = parse(raw.decode("utf-8", "replace"))
            if line is not None:
                await self._line(line)
            self._regain_nick()

    async def _line(self, line: Line) -> None:
        command = line.command
        if command == "PING":
            self._write(format_line("PONG", *line.params[-1:]))
        elif command == "PONG" and line.params:
            future = self._fences.pop(line.params[-1], None)
            if future is not None and not future.done():
                future.set_result([f"{t}: {why}" for t, why in self._refusals])
                self._refusals.clear()
        elif command == "ERROR":
            raise ConnectionError(line.params[-1] if line.params else "ERROR from the server")
        elif command in REFUSALS and len(line.params) >= 2:
            self._refusals.append((line.params[1], f"{REFUSALS[command]} ({command})"))
        elif command == "JOIN" and casefold(line.nick) == casefold(self.nick):
            self.source = line.source  # how the server shows us: the prefix of our lines
        elif command == "NICK" and casefold(line.nick) == casefold(self.nick) and line.params:
            self.nick = line.params[0]
            self.source = self.nick + self.source[len(line.nick) :]
        elif command in ("PRIVMSG", "NOTICE"):
            await self._on_message(line)

    def _regain_nick(self) -> None:
        """While another connection holds our nick (ours, not yet timed out, or someone's),
        ask for it back now and then."""
        if casefold(self.nick) == casefold(self.settings.nick):
            return
        now = time.monotonic()
        if now - self._nick_asked >= NICK_RETRY_SECONDS:
            self._nick_asked = now
            self._write(format_line("NICK", self.settings.nick))

    def _write(self, text: str) -> None:
        writer = self._writer
        if writer is None:
            raise ChannelTransientError("not connected to the IRC server")
        writer.write(text.encode() + b"\r\n")

    # -- sending --------------------------------------------------------------------------

    async def deliver(self, lines: list[str], target: str) -> None:
        """Send ``lines`` (whole protocol lines), paced, then wait until the server has
        handled them; raise for a refusal of ``target``."""
        if not self.registered.is_set():
            raise ChannelTransientError("not connected to the IRC server yet")
        async with self._send_lock:  # one message's lines together, in order
            self._refusals.clear()
            for line in lines:
                await self._pacer.take()
                self._write(line)
            token = f"sb{next(self._tokens)}"
            future: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
            self._fences[token] = future
            self._write(format_line("PING", token))
            writer = self._writer
            if writer is not None:
                await writer.drain()
            try:
                async with asyncio.timeout(FENCE_TIMEOUT):
                    refusals = await future
            except TimeoutError:
                self._fences.pop(token, None)
                raise ChannelTransientError("the IRC server did not confirm the lines") from None
        mine = [r for r in refusals if casefold(r.split(":", 1)[0]) == casefold(target)]
        if mine:
            raise ChannelPermanentError(f"the IRC server refused the message: {mine[0]}")


async def open_connection(
    settings: IrcSettings,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = settings.address
    context = ssl.create_default_context() if settings.tls else None
    async with asyncio.timeout(CONNECT_TIMEOUT):
        return await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context else None, limit=65_536
        )
