"""Server-side login sessions for the web chat and status page.

The login form hands the browser a random session id (256 bits) in an HttpOnly cookie;
the server keeps only its SHA-256 and when it expires (``web.session_hours``). Logging out
deletes it, so a copied cookie stops working; a login after that gets a new id. Sessions
are kept in the store's key-value table, so a restart does not log anyone out, together
with a fingerprint of ``web.token``: when the token changes, every session made under the
old one is revoked at the next start.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

KEY = "web_sessions"
MAX_SESSIONS = 64  # one per browser that logged in; beyond it the oldest logins end


class KeyValueStore(Protocol):
    async def get(self, key: str) -> Any: ...

    async def set(self, key: str, value: Any) -> None: ...


class WebSessions:
    def __init__(
        self,
        token: bytes,
        *,
        lifetime_seconds: float,
        kv: KeyValueStore | None = None,
        clock: Callable[[], float] = time.time,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.lifetime_seconds = lifetime_seconds
        self._fingerprint = hmac.new(token, b"switchboard web sessions v2", "sha256").hexdigest()
        self._kv = kv
        self._clock = clock
        self._max = max_sessions
        self._expiry: dict[str, float] = {}  # SHA-256 of the id -> expiry (wall clock)
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Sessions kept from the last run, unless they expired or the token changed."""
        if self._kv is None:
            return
        stored = await self._kv.get(KEY)
        now = self._clock()
        if isinstance(stored, dict) and stored.get("token") == self._fingerprint:
            sessions = stored.get("sessions")
            if isinstance(sessions, dict):
                self._expiry = {
                    str(digest): float(expires)
                    for digest, expires in sessions.items()
                    if isinstance(expires, int | float) and expires > now
                }
        await self._save()  # a new token's fingerprint replaces the old sessions now

    def valid(self, session_id: str) -> bool:
        digest = _digest(session_id)
        expires = self._expiry.get(digest)
        if expires is None:
            return False
        if expires <= self._clock():
            del self._expiry[digest]  # forgotten in the store at the next change
            return False
        return True

    async def create(self) -> str:
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        self._expiry = {d: e for d, e in self._expiry.items() if e > now}
        self._expiry[_digest(session_id)] = now + self.lifetime_seconds
        while len(self._expiry) > self._max:
            del self._expiry[min(self._expiry, key=self._expiry.__getitem__)]
        await self._save()
        return session_id

    async def revoke(self, session_id: str) -> None:
        if self._expiry.pop(_digest(session_id), None) is not None:
            await self._save()

    @property
    def count(self) -> int:
        return len(self._expiry)

    async def _save(self) -> None:
        if self._kv is None:
            return
        async with self._lock:
            snapshot = dict(self._expiry)
            await self._kv.set(KEY, {"token": self._fingerprint, "sessions": snapshot})


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()
