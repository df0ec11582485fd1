"""One-time sign-in links for the web chat: ``switchboard run`` (in a terminal) and
``switchboard web`` print one.

Only the user who runs the gateway can make a link: it is signed with a key kept in
``data/web-signin.key`` (created 0600 by the gateway), which no other uid can read. A link
carries ``<expiry>.<nonce>.<HMAC>``; the server accepts each nonce once and only before the
expiry (ten minutes), then hands the browser a server-side session cookie and its page a
page key (:mod:`gateway.web.access.sessions`) and forgets the code. Without ``web.token``
it is the only way a browser becomes the owner; with a token it works too.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from gateway.core.credentials import same_secret

KEY_FILE = "web-signin.key"
LIFETIME_SECONDS = 600
MAX_REMEMBERED = 4096  # used nonces kept until they expire; beyond it the oldest go


class SignInUnavailable(Exception):
    """No key to sign with (the gateway never ran here, or this user may not read it)."""


def ensure_key(data_dir: Path) -> bytes:
    """The signing key, created (owner-only) on the first start."""
    path = data_dir / KEY_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        path.chmod(0o600, follow_symlinks=False)
        return read_key(data_dir)
    with os.fdopen(fd, "wb") as file:
        file.write(secrets.token_bytes(32))
    return read_key(data_dir)


def read_key(data_dir: Path) -> bytes:
    try:
        key = (data_dir / KEY_FILE).read_bytes()
    except PermissionError:
        raise SignInUnavailable(
            "only the user who runs the gateway can sign a browser in; run this as that user"
        ) from None
    except OSError:
        raise SignInUnavailable("the gateway has not started here yet (switchboard run)") from None
    if len(key) < 32:
        raise SignInUnavailable(f"{data_dir / KEY_FILE} is damaged; delete it and restart")
    return key


def sign_in_link(
    key: bytes, base_url: str, *, now: float | None = None, lifetime: int = LIFETIME_SECONDS
) -> str:
    expires = int(time.time() if now is None else now) + lifetime
    nonce = secrets.token_urlsafe(16)
    return f"{base_url.rstrip('/')}/signin?code={expires}.{nonce}.{_mac(key, expires, nonce)}"


def _mac(key: bytes, expires: int, nonce: str) -> str:
    return hmac.new(key, f"sign-in {expires}.{nonce}".encode(), hashlib.sha256).hexdigest()


class SignInCodes:
    """Checks and uses up the codes of sign-in links. Which were used is kept in memory, so
    a code made before this process started is refused outright: a link used before a
    restart cannot sign in again after it (an unused one is made again with
    ``switchboard web``)."""

    def __init__(self, key: bytes, *, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self._clock = clock
        self._since = int(clock())  # codes carry whole seconds
        self._used: dict[str, int] = {}

    def redeem(self, code: str) -> bool:
        """Whether ``code`` is genuine, unexpired and unused (it is used up now)."""
        expires_text, _, rest = code.partition(".")
        nonce, _, mac = rest.partition(".")
        if not expires_text.isdigit() or not nonce or len(nonce) > 64:
            return False
        expires = int(expires_text)
        if not same_secret(mac, _mac(self._key, expires, nonce)):
            return False
        now = self._clock()
        if not now < expires <= now + LIFETIME_SECONDS + 60 or nonce in self._used:
            return False
        if expires - LIFETIME_SECONDS < self._since:  # made for an earlier process
            return False
        self._used = {n: e for n, e in self._used.items() if e > now}
        while len(self._used) >= MAX_REMEMBERED:
            del self._used[min(self._used, key=self._used.__getitem__)]
        self._used[nonce] = expires
        return True

    def forget_links(self) -> None:
        """Every link made until now stops working (``switchboard web --sign-out-all``)."""
        self._since = int(self._clock()) + 1
