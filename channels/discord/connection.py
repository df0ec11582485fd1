"""The Discord gateway connection: discord.py's client with a reconnect loop that stays polite.

What discord.py 2.x does by itself (``Client.connect``): on a dropped socket, an ``op 7
RECONNECT`` or an ``op 9 INVALID_SESSION`` that allows resuming, it RESUMEs *at once*, with
no delay, and keeps doing so for as long as the server keeps accepting the socket; only
network errors (connect refused, DNS, timeouts) wait for its exponential backoff, and a
network failure always retries a RESUME against the last ``resume_gateway_url``. A session
that never resumes again (the server closes every RESUME) therefore loops without pause
and never identifies afresh — the failure mode behind a peer's 38,564 resume attempts in
one day. Its ``before_identify_hook`` also sleeps a fixed 5 s before every re-identify.

What :class:`GatewayClient` changes, by replacing only that outer loop (the websocket,
heartbeats, RESUME/IDENTIFY payloads, event parsing and the REST rate-limit buckets stay
discord.py's own):

* An attempt *succeeds* when the server answers READY or RESUMED; anything else is a failure.
* After a connection that lived ``stable_after`` seconds the next one is immediate (what
  Discord asks for on ``op 7``); after a failure, or a connection that dropped right after
  it succeeded (flapping), it waits for capped exponential backoff with jitter
  (:class:`gateway.core.backoff.Backoff`).
* After ``max_failed_resumes`` failed RESUMEs in a row the session is dropped and the next
  attempt is a fresh IDENTIFY against the default gateway URL.
* At most ``max_failures`` failed attempts (login, connect, resume or identify) fall in any
  ``window`` seconds (10 minutes); more wait until the oldest leaves the window. This bounds
  the invalid requests Discord counts towards a temporary ban, whatever the server does.
* Close codes that retrying cannot fix (4004 bad token, 4010-4013, 4014 privileged intent
  not enabled) end the loop with a clear error instead of hammering the gateway; during
  ``start`` they fail the start (a :class:`gateway.core.errors.ConfigError`).
* 4007 (invalid sequence) and 4009 (session timed out) mean the session is gone: the next
  attempt is an IDENTIFY, not a RESUME Discord would refuse. Every other close code
  (4000-4003, 4005, 4008, 1000-1011) RESUMEs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket, ReconnectWebSocket

from gateway.core.backoff import Backoff

log = logging.getLogger(__name__)

# Close codes after which Discord will never accept the same connection (see the gateway docs).
FATAL_CLOSE_CODES = {
    4004: "authentication failed: check SWITCHBOARD_DISCORD__TOKEN",
    4010: "invalid shard",
    4011: "sharding required",
    4012: "invalid gateway API version",
    4013: "invalid intents",
    4014: (
        "disallowed intents: enable MESSAGE CONTENT INTENT for the bot in the Discord "
        "developer portal (Bot > Privileged Gateway Intents)"
    ),
}
# Close codes after which Discord has ended the session: reconnect with a fresh IDENTIFY
# (discord.py would try a RESUME first, which Discord refuses: one wasted connection).
NEW_SESSION_CLOSE_CODES = {4007: "invalid sequence", 4009: "session timed out"}
_NETWORK_ERRORS = (
    OSError,
    discord.HTTPException,
    discord.GatewayNotFound,
    aiohttp.ClientError,
    TimeoutError,
)


@dataclass(slots=True)
class ReconnectPolicy:
    """When to reconnect, and how to resume; see the module docstring. Tests shrink it."""

    base: float = 1.0
    cap: float = 60.0
    max_failed_resumes: int = 3
    max_failures: int = 30  # failed attempts allowed in ``window``
    window: float = 600.0
    stable_after: float = 30.0  # a connection that lived this long earns an immediate reconnect
    connect_timeout: float = 60.0
    clock: Callable[[], float] = time.monotonic

    failures: deque[float] = field(default_factory=deque, init=False)
    consecutive: int = field(default=0, init=False)  # attempts since the last stable connection
    failed_resumes: int = field(default=0, init=False)
    _backoff: Backoff = field(init=False)

    def __post_init__(self) -> None:
        self._backoff = Backoff(base=self.base, cap=self.cap)

    def ended(self, *, ok: bool, resumed: bool, lasted: float) -> None:
        """Record how an attempt ended: ``ok`` if READY/RESUMED arrived, ``lasted`` seconds."""
        if ok:
            self.failed_resumes = 0
            if lasted >= self.stable_after:
                self.consecutive = 0
                self._backoff.reset()
                return
            self.consecutive += 1  # flapping: connected, then dropped at once; back off anyway
            return
        self.consecutive += 1
        if resumed:
            self.failed_resumes += 1
        self.failures.append(self.clock())

    def should_resume(self, has_session: bool) -> bool:
        return has_session and self.failed_resumes < self.max_failed_resumes

    def delay(self) -> float:
        """Seconds to wait before the next attempt (0 after a stable connection)."""
        now = self.clock()
        while self.failures and self.failures[0] <= now - self.window:
            self.failures.popleft()
        wait = 0.0 if self.consecutive == 0 else self._backoff.next()
        if len(self.failures) >= self.max_failures:
            wait = max(wait, self.failures[0] + self.window - now)
        return wait


class FatalGatewayError(discord.DiscordException):
    """Discord closed the gateway for a reason reconnecting cannot fix."""

    def __init__(self, code: int) -> None:
        super().__init__(f"Discord gateway closed with {code}: {FATAL_CLOSE_CODES[code]}")
        self.code = code


MessageHandler = Callable[[discord.Message], Awaitable[None]]
InteractionHandler = Callable[[discord.Interaction], Awaitable[None]]


async def _no_interactions(interaction: discord.Interaction) -> None:
    return None


class GatewayClient(discord.Client):
    """``discord.Client`` whose connect loop follows :class:`ReconnectPolicy`."""

    def __init__(
        self,
        *,
        policy: ReconnectPolicy,
        on_message: MessageHandler,
        on_interaction: InteractionHandler = _no_interactions,
        on_edit: MessageHandler | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.policy = policy
        self._handle_message = on_message
        self._handle_edit = on_edit
        self._handle_interaction = on_interaction
        self.connected = asyncio.Event()
        self.attempts = 0  # gateway connections opened, for health and tests
        self._attempt_ok = False

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        # "connect" is dispatched while READY is parsed, "resumed" for RESUMED: both mean the
        # current attempt worked. (Synchronous, so no race with the next socket failure.)
        if event in ("connect", "resumed"):
            self._attempt_ok = True
            self.connected.set()
        elif event == "disconnect":
            self.connected.clear()
        super().dispatch(event, *args, **kwargs)

    async def on_message(self, message: discord.Message) -> None:
        await self._handle_message(message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        """An edited message (cached or not). Discord also sends updates that only add an
        embed or a link preview: those have no ``edited_timestamp`` and are not edits."""
        if self._handle_edit is not None and payload.message.edited_at is not None:
            await self._handle_edit(payload.message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._handle_interaction(interaction)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """No fixed 5 s sleep: :meth:`connect` has already waited as the policy says."""

    async def connect(self, *, reconnect: bool = True) -> None:
        session = _Session()
        while not self.is_closed():
            resume = self.policy.should_resume(session.id is not None)
            if session.id is not None and not resume:
                log.warning(
                    "discord: %d resumes failed; identifying afresh", self.policy.failed_resumes
                )
                session = _Session()
                self.policy.failed_resumes = 0
            delay = self.policy.delay()
            if delay > 0:
                log.info("discord: reconnecting in %.1fs", delay)
                await asyncio.sleep(delay)
                if self.is_closed():
                    return
            self._attempt_ok = False
            self.attempts += 1
            started = self.policy.clock()
            session = await self._attempt(session, resume=resume)
            if self.is_closed():
                return
            self.dispatch("disconnect")
            self.policy.ended(
                ok=self._attempt_ok, resumed=resume, lasted=self.policy.clock() - started
            )

    async def _attempt(self, session: _Session, *, resume: bool) -> _Session:
        """One gateway connection, until it ends; returns the session to resume next."""
        ws: DiscordWebSocket | None = None
        try:
            ws = await asyncio.wait_for(
                DiscordWebSocket.from_client(
                    self,
                    initial=self.attempts == 1,
                    gateway=session.url if resume else None,
                    shard_id=self.shard_id,
                    session=session.id if resume else None,
                    sequence=session.sequence if resume else None,
                    resume=resume,
                ),
                timeout=self.policy.connect_timeout,
            )
            self.ws = ws
            while True:
                await ws.poll_event()
        except ReconnectWebSocket as exc:
            log.debug("discord: gateway asked to %s", exc.op)
            if not exc.resume:  # op 9 with d=false: the session is gone, identify next
                return _Session()
            code = ws.socket.close_code if ws is not None else None
            if code in NEW_SESSION_CLOSE_CODES:
                log.info(
                    "discord: gateway closed with %s (%s)", code, NEW_SESSION_CLOSE_CODES[code]
                )
                return _Session()
        except discord.ConnectionClosed as exc:
            if exc.code in FATAL_CLOSE_CODES and not self.is_closed():
                self.dispatch("disconnect")  # health shows it down
                await self.close()
                raise FatalGatewayError(exc.code) from None
            log.info("discord: gateway closed with %s", exc.code)
        except _NETWORK_ERRORS as exc:
            log.info("discord: gateway connection failed: %s", exc or type(exc).__name__)
        if ws is not None and ws.session_id is not None:
            return _Session(ws.session_id, ws.sequence, ws.gateway)
        return session


@dataclass(frozen=True, slots=True)
class _Session:
    """What a RESUME needs: the session id, the last sequence number and the resume URL."""

    id: str | None = None
    sequence: int | None = None
    url: yarl.URL | None = None
