"""Slowing down token guessing: failed logins per client address, and who the client is.

Every failed credential counts (a wrong Bearer token, an unknown or expired session cookie,
a wrong password in the login form), and a throttled client is refused *before* its
credential is checked, so even a right guess gets nothing until the window has passed. The
web server's guard lets a valid session or sign-in link through all the same (they cannot
be guessed: :meth:`gateway.web.access.security.WebGuard.refused_as_guessing`), so a
guesser on the owner's address does not lock the owner out.

Behind a reverse proxy every request comes from the proxy's address; one guesser would
lock out everyone. With ``web.trusted_proxies`` the client is the right-most address of
``X-Forwarded-For`` that is not a trusted proxy (the proxies append; what the client sent
itself is further left and never trusted). Without it, the peer address is the client and
forwarding headers are ignored.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from aiohttp import web

LOGIN_WINDOW_SECONDS = 60.0
LOGIN_MAX_FAILURES = 10
MAX_TRACKED_CLIENTS = 10_000  # failed-login records kept; a flood of addresses stays bounded

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(request: web.Request, trusted_proxies: Sequence[Network]) -> str:
    """The address failures are counted against (see the module docstring)."""
    peer = request.remote or "?"
    if not trusted_proxies or not _trusted(peer, trusted_proxies):
        return peer
    hops = [
        hop.strip()
        for header in request.headers.getall("X-Forwarded-For", ())
        for hop in header.split(",")
        if hop.strip()
    ]
    for hop in reversed(hops):
        if not _trusted(hop, trusted_proxies):
            return hop[:64]
    return hops[0][:64] if hops else peer


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


class LoginThrottle:
    """Recent failed logins per client, in two tiers, so that a flood of new addresses
    pushes out clients still under the limit before it frees a throttled one: under the
    limit, by latest failure (oldest first); at the limit, by arrival."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_TRACKED_CLIENTS,
    ) -> None:
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._throttled: OrderedDict[str, deque[float]] = OrderedDict()
        self._max_clients = max_clients

    @property
    def tracked_clients(self) -> int:
        """Clients with failed logins on record (bounded by ``max_clients``)."""
        return len(self._failures) + len(self._throttled)

    def throttled(self, client: str) -> bool:
        failures = self._throttled.get(client)
        if failures is None:
            return False
        if _recent(failures, self._clock()) >= LOGIN_MAX_FAILURES:
            return True
        del self._throttled[client]  # the oldest failures left the window
        if failures:
            self._failures[client] = failures  # the next failure may throttle it again
        return False

    def record_failure(self, client: str) -> None:
        now = self._clock()
        failures = self._throttled.pop(client, None) or self._failures.pop(client, None)
        if failures is None:
            failures = deque(maxlen=LOGIN_MAX_FAILURES)
        failures.append(now)
        at_limit = _recent(failures, now) >= LOGIN_MAX_FAILURES
        (self._throttled if at_limit else self._failures)[client] = failures  # at the end
        self._forget(now)

    def _forget(self, now: float) -> None:
        """Drop clients whose failures all left the window; over the cap, the longest-quiet
        clients under the limit first, throttled ones only when no other is left."""
        cutoff = now - LOGIN_WINDOW_SECONDS
        for tier in (self._failures, self._throttled):
            while tier:
                oldest = next(iter(tier.values()))
                if oldest and oldest[-1] >= cutoff:
                    break
                tier.popitem(last=False)
        while self.tracked_clients > self._max_clients:
            (self._failures or self._throttled).popitem(last=False)


def _recent(failures: deque[float], now: float) -> int:
    """Drop failures older than the login window; how many are left."""
    cutoff = now - LOGIN_WINDOW_SECONDS
    while failures and failures[0] < cutoff:
        failures.popleft()
    return len(failures)
