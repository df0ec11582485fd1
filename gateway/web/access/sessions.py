"""Server-side sessions of signed-in browsers (the web chat and its pages).

A sign-in link or the login form hands the browser a random session id (256 bits) in an
HttpOnly ``SameSite=Strict`` cookie, and a second random secret, the sign-in's *page key*
(256 bits), which the page keeps in the origin's own storage and sends with every request
its scripts make. Both are needed: a browser sends a cookie of ``127.0.0.1`` to every port
of that host, so a program listening on another port receives the cookie, but the key is
kept by the origin (scheme, host and port), which only this server's pages can read
(:mod:`gateway.web.access.security`). The server keeps only SHA-256 digests of both, when
the session expires (``web.session_hours``) and when it is due for a new id. A session in use gets a new id
every ``RENEW_SECONDS`` (the old one keeps working for ``GRACE_SECONDS``, for requests the
page had already sent), so a cookie copied once stops working soon. The ids one browser got
this way are one *sign-in*, with one page key (it is not renewed: the page keeps it, and
an id renewed while another tab's request was on its way must still match it): what a page
keeps open (its WebSocket) belongs to the sign-in, so it outlives a renewal and ends with the
sign-in (:mod:`gateway.web.access.streams`).
Logging out ends the browser's sign-in, every id of it; ``switchboard web --sign-out-all``
deletes every session (:data:`SIGNED_OUT`, which the web servers of a store other processes
share read every few seconds). Sessions are kept in the store's
key-value table, so a restart does not sign anyone out, together with a fingerprint of
``web.token``: when the token changes, every session made under the old one is revoked at
the next start. Sessions kept before sign-ins had a page key are not loaded: no browser
holds a key for them, so their browsers sign in again.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.core.credentials import as_bytes

KEY = "web_sessions"
# When `switchboard web --sign-out-all` last signed every browser out (Unix time): read by
# every running web server (a cluster's leader is another process, maybe on another machine).
SIGNED_OUT = "web_signed_out_at"
MAX_SESSIONS = 64  # one per browser that signed in; beyond it the oldest sign-ins end
RENEW_SECONDS = 12 * 3600.0
GRACE_SECONDS = 60.0


class KeyValueStore(Protocol):
    async def get(self, key: str) -> Any: ...

    async def set(self, key: str, value: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class _Session:
    expires: float  # wall clock
    renew_at: float  # when a request with it gets a new id
    key: str  # the SHA-256 of its sign-in's page key
    sign_in: str  # the sign-in it continues (the first id's digest); in memory only


@dataclass(frozen=True, slots=True)
class NewSignIn:
    """What a browser that signs in is given: the cookie's session id and the page key."""

    session: str
    key: str


class WebSessions:
    def __init__(
        self,
        token: bytes,
        *,
        lifetime_seconds: float,
        kv: KeyValueStore | None = None,
        clock: Callable[[], float] = time.time,
        max_sessions: int = MAX_SESSIONS,
        renew_seconds: float = RENEW_SECONDS,
    ) -> None:
        self.lifetime_seconds = lifetime_seconds
        self._fingerprint = hmac.new(token, b"switchboard web sessions v2", "sha256").hexdigest()
        self._kv = kv
        self._clock = clock
        self._max = max_sessions
        self._renew = renew_seconds
        self._sessions: dict[str, _Session] = {}  # SHA-256 of the id -> its times
        self._lock = asyncio.Lock()
        self._signed_out = 0.0  # the last sign-out of everyone this process knows of

    async def load(self) -> None:
        """Sessions kept from the last run, unless they expired or the token changed."""
        if self._kv is None:
            return
        stored = await self._kv.get(KEY)
        self._signed_out = _seconds(await self._kv.get(SIGNED_OUT))
        now = self._clock()
        if isinstance(stored, dict) and stored.get("token") == self._fingerprint:
            sessions = stored.get("sessions")
            if isinstance(sessions, dict):
                for digest, times in sessions.items():
                    session = _parse(str(digest), times)
                    if session is None or session.expires <= now:
                        continue
                    if session.renew_at - self._renew < self._signed_out:
                        continue  # made before everyone was signed out
                    self._sessions[str(digest)] = session
        await self._save()  # a new token's fingerprint replaces the old sessions now

    async def signed_out_elsewhere(self) -> bool:
        """Whether everyone was signed out by another process since this one last looked
        (``switchboard web --sign-out-all`` against a cluster's store); if so, every
        session here has ended now."""
        if self._kv is None:
            return False
        when = _seconds(await self._kv.get(SIGNED_OUT))
        if when <= self._signed_out:
            return False
        self._signed_out = when
        await self._end_all()
        return True

    def valid(self, session_id: str) -> bool:
        return self.sign_in_of(session_id) is not None

    def sign_in_of(self, session_id: str) -> str | None:
        """The sign-in a valid session continues; ``None`` for an unknown or expired one."""
        digest = _digest(session_id)
        session = self._sessions.get(digest)
        if session is None:
            return None
        if session.expires <= self._clock():
            del self._sessions[digest]  # forgotten in the store at the next change
            return None
        return session.sign_in

    def sign_in_with(self, session_id: str, key: str) -> str | None:
        """The sign-in a valid session continues when ``key`` is its page key (compared in
        constant time); ``None`` otherwise: the cookie alone is not enough."""
        digest = _digest(session_id)
        sign_in = self.sign_in_of(session_id)
        if sign_in is None:
            return None
        if not hmac.compare_digest(_digest(key), self._sessions[digest].key):
            return None
        return sign_in

    def signed_in(self, sign_in: str) -> bool:
        """Whether a sign-in goes on: some unexpired session continues it."""
        now = self._clock()
        return any(s.sign_in == sign_in and s.expires > now for s in self._sessions.values())

    async def create(self) -> NewSignIn:
        """A new sign-in: its first session id and its page key."""
        key = secrets.token_urlsafe(32)
        return NewSignIn(await self._add(None, _digest(key)), key)

    async def _add(self, sign_in: str | None, key: str) -> str:
        """A new session id, continuing ``sign_in`` (``None``: it begins a sign-in) whose
        page key's digest is ``key``."""
        session_id = secrets.token_urlsafe(32)
        digest = _digest(session_id)
        now = self._clock()
        self._sessions = {d: s for d, s in self._sessions.items() if s.expires > now}
        self._sessions[digest] = _Session(
            now + self.lifetime_seconds, now + self._renew, key, sign_in or digest
        )
        while len(self._sessions) > self._max:
            oldest = min(self._sessions, key=lambda d: self._sessions[d].expires)
            del self._sessions[oldest]
        await self._save()
        return session_id

    async def renew(self, session_id: str) -> str | None:
        """A new id for a valid session that is due for one (the old id lasts
        ``GRACE_SECONDS`` more); ``None`` while it is not due."""
        digest = _digest(session_id)
        session = self._sessions.get(digest)
        now = self._clock()
        if session is None or session.renew_at > now or session.expires <= now:
            return None
        self._sessions[digest] = _Session(
            min(session.expires, now + GRACE_SECONDS), session.expires, session.key, session.sign_in
        )
        return await self._add(session.sign_in, session.key)

    async def revoke(self, session_id: str) -> None:
        """The browser is signed out: every id of its sign-in ends, a renewed one's
        predecessor still in its grace time too."""
        session = self._sessions.get(_digest(session_id))
        if session is None:
            return
        self._sessions = {d: s for d, s in self._sessions.items() if s.sign_in != session.sign_in}
        await self._save()

    async def revoke_all(self) -> int:
        """Every browser is signed out, here and on every other web server of the store;
        how many sessions ended."""
        self._signed_out = self._clock()
        if self._kv is not None:
            await self._kv.set(SIGNED_OUT, self._signed_out)
        return await self._end_all()

    async def _end_all(self) -> int:
        ended = len(self._sessions)
        self._sessions.clear()
        await self._save()
        return ended

    @property
    def count(self) -> int:
        return len(self._sessions)

    async def _save(self) -> None:
        if self._kv is None:
            return
        async with self._lock:
            snapshot = {d: [s.expires, s.renew_at, s.key] for d, s in self._sessions.items()}
            await self._kv.set(KEY, {"token": self._fingerprint, "sessions": snapshot})


async def sign_out_stored(kv: KeyValueStore, now: float) -> int:
    """Every browser signed out in the store itself, where no web server runs beside the
    command (a cluster's leader elsewhere, or none): running ones follow :data:`SIGNED_OUT`,
    and the next start keeps none of the stored sessions. How many there were."""
    stored = await kv.get(KEY)
    sessions = stored.get("sessions") if isinstance(stored, dict) else None
    await kv.set(SIGNED_OUT, now)
    await kv.set(KEY, {})  # no fingerprint: the next start keeps none of them
    return len(sessions) if isinstance(sessions, dict) else 0


def _parse(digest: str, stored: object) -> _Session | None:
    """A stored session: ``[expires, renew_at, key digest]``. Each is a sign-in of its own:
    which id replaced which is not kept, as no page stays open across a restart. One kept
    before sign-ins had a page key (the expiry alone, or ``[expires, renew_at]``) is
    ``None``: its browser holds no key, so it could open nothing."""
    if not isinstance(stored, list) or len(stored) != 3:
        return None
    expires, renew_at, key = stored
    if not isinstance(expires, int | float) or not isinstance(renew_at, int | float):
        return None
    if not isinstance(key, str) or len(key) != 64:
        return None
    return _Session(float(expires), float(renew_at), key, digest)


def _digest(session_id: str) -> str:
    return hashlib.sha256(as_bytes(session_id)).hexdigest()


def _seconds(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
