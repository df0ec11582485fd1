"""Who may use the web server, and from which pages.

Every request passes :meth:`WebGuard.middleware`:

* **Host check** (loopback binds): only ``localhost``/loopback names (and hosts of
  ``web.trusted_origins``) are served, so a page on another site that re-points its DNS
  name at 127.0.0.1 (DNS rebinding) gets nothing.
* **Authentication**: with ``web.token`` set, a request needs ``Authorization: Bearer
  <token>`` or the HttpOnly ``SameSite=Strict`` cookie the login form sets (it holds an HMAC
  of the token, not the token). The token is never read from a URL. Without a token the
  server is bound to loopback (settings refuse anything else) and every local request is the
  owner, like the terminal; a request that came through a proxy is refused then.
* **Cross-site protection**: state-changing requests and WebSocket upgrades need an
  ``Origin`` equal to the server's own (or a trusted one). A request without ``Origin`` is
  accepted only with a Bearer header, which no other site can make a browser send.
* **Browser id**: each browser gets a random id in an HttpOnly cookie; the web chat keys its
  session on it. It never appears in a URL.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import hdrs, web

from gateway.config.channels import WebSettings
from gateway.core.webhost import BROWSER_ID

AUTH_COOKIE = "switchboard_auth"
BROWSER_COOKIE = "switchboard_browser"
NEW_BROWSER_ID = web.RequestKey("switchboard_new_browser_id", bool)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/login"})
PUBLIC_PREFIXES = ("/static/",)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP")
_BROWSER_ID_RE = re.compile(r"[A-Za-z0-9_-]{32}")
_NEXT_RE = re.compile(r"/[A-Za-z0-9/_-]*")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
BROWSER_COOKIE_MAX_AGE = 400 * 24 * 3600  # the longest browsers keep a cookie
LOGIN_WINDOW_SECONDS = 60.0
LOGIN_MAX_FAILURES = 10
MAX_TRACKED_CLIENTS = 10_000  # failed-login records kept; a flood of addresses stays bounded

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def host_name(host_header: str) -> str:
    """``"[::1]:8787"`` → ``"::1"``, ``"Example.org:80"`` → ``"example.org"``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_name(name: str) -> bool:
    """A loopback address or a ``localhost`` name; ``127.evil.example`` is not one."""
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_websocket(request: web.Request) -> bool:
    return request.headers.get(hdrs.UPGRADE, "").lower() == "websocket"


def safe_next(value: str | None) -> str:
    """Where to go after login: a local path only (never ``//host`` or a full URL)."""
    if value and _NEXT_RE.fullmatch(value) and not value.startswith("//"):
        return value
    return "/"


class WebGuard:
    def __init__(
        self,
        settings: WebSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_TRACKED_CLIENTS,
    ):
        self._settings = settings
        token = settings.token.get_secret_value().strip() if settings.token else ""
        self._token = token.encode() if token else None
        self._session = (
            hmac.new(self._token, b"switchboard web session v1", hashlib.sha256).hexdigest()
            if self._token
            else None
        )
        self._trusted = frozenset(settings.trusted_origins)
        self._trusted_hosts = frozenset(
            host_name(urlsplit(origin).netloc) for origin in settings.trusted_origins
        )
        self._clock = clock
        # Recent failed logins per client address, in two tiers, so that a flood of new
        # addresses pushes out clients still under the limit before it frees a throttled
        # one: under the limit, by latest failure (oldest first); at the limit, by arrival.
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._throttled: OrderedDict[str, deque[float]] = OrderedDict()
        self._max_clients = max_clients

    @property
    def token_required(self) -> bool:
        return self._token is not None

    # -- checks ---------------------------------------------------------------------------

    def host_allowed(self, request: web.Request) -> bool:
        if not self._settings.loopback:
            return True  # the token guards a network bind; any Host name may be used
        name = host_name(request.host)
        return is_loopback_name(name) or name in self._trusted_hosts

    def authenticate(self, request: web.Request) -> str | None:
        """How the request proves it is the owner: "local", "bearer", "cookie", or None."""
        if self._token is None:
            return "local"
        header = request.headers.get(hdrs.AUTHORIZATION, "")
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer" and credential:
            return "bearer" if self.token_matches(credential.strip()) else None
        cookie = request.cookies.get(AUTH_COOKIE, "")
        if cookie and self._session and hmac.compare_digest(cookie, self._session):
            return "cookie"
        return None

    def token_matches(self, candidate: str) -> bool:
        return self._token is not None and hmac.compare_digest(candidate.encode(), self._token)

    def same_origin(self, request: web.Request) -> bool:
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is None:
            return False
        origin = origin.strip().rstrip("/").lower()
        if origin in self._trusted:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == request.host.lower()

    def cross_site_refused(self, request: web.Request, how: str | None) -> bool:
        """Whether a state-changing request or socket must be refused as cross-site."""
        if request.method in SAFE_METHODS and not is_websocket(request):
            return False
        if hdrs.ORIGIN in request.headers:
            return not self.same_origin(request)
        # No Origin: not a browser. Only a Bearer header (which a page cannot make another
        # site's browser send) is good enough; sockets always need an Origin.
        return is_websocket(request) or how != "bearer"

    # -- login throttling -----------------------------------------------------------------

    @property
    def tracked_clients(self) -> int:
        """Clients with failed logins on record (bounded by ``max_clients``)."""
        return len(self._failures) + len(self._throttled)

    def throttled(self, request: web.Request) -> bool:
        client = request.remote or "?"
        failures = self._throttled.get(client)
        if failures is None:
            return False
        if _recent(failures, self._clock()) >= LOGIN_MAX_FAILURES:
            return True
        del self._throttled[client]  # the oldest failures left the window
        if failures:
            self._failures[client] = failures  # the next failure may throttle it again
        return False

    def record_failure(self, request: web.Request) -> None:
        now = self._clock()
        client = request.remote or "?"
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

    # -- middleware -----------------------------------------------------------------------

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await self._checked(request, handler)
        if not response.prepared:
            self.decorate(request, response)
        return response

    async def _checked(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.host_allowed(request):
            return web.Response(status=421, text="This server answers to localhost only.\n")
        if self._token is None and any(h in request.headers for h in FORWARDING_HEADERS):
            return web.Response(
                status=403,
                text="Reached through a proxy: set web.token (SWITCHBOARD_WEB__TOKEN) first.\n",
            )
        path = request.path
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            if self.cross_site_refused(request, None) and request.method not in SAFE_METHODS:
                return _refused("cross-site request refused")
            return await handler(request)
        how = self.authenticate(request)
        if how is None:
            if hdrs.AUTHORIZATION in request.headers:
                if self.throttled(request):
                    return web.Response(status=429, text="Too many attempts; wait a minute.\n")
                self.record_failure(request)
            return self._unauthenticated(request)
        if self.cross_site_refused(request, how):
            return _refused("cross-site request refused")
        self._identify_browser(request)
        return await handler(request)

    def _unauthenticated(self, request: web.Request) -> web.StreamResponse:
        wants_page = request.method == "GET" and "text/html" in request.headers.get(hdrs.ACCEPT, "")
        if wants_page and not is_websocket(request):
            return redirect(f"/login?next={safe_next(request.path)}")
        return web.json_response(
            {"error": "authentication required"},
            status=401,
            headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="switchboard"'},
        )

    def _identify_browser(self, request: web.Request) -> None:
        value = request.cookies.get(BROWSER_COOKIE, "")
        fresh = not _BROWSER_ID_RE.fullmatch(value)
        request[BROWSER_ID] = secrets.token_urlsafe(24) if fresh else value
        request[NEW_BROWSER_ID] = fresh

    def decorate(self, request: web.Request, response: web.StreamResponse) -> None:
        """Security headers, and the browser-id cookie when it was just made.

        A WebSocket handler calls this itself before its handshake is sent.
        """
        headers = response.headers
        headers.setdefault("Content-Security-Policy", CSP)
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("X-Frame-Options", "DENY")
        headers.setdefault("Referrer-Policy", "same-origin")  # "no-referrer" makes Origin null
        headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
        if not request.path.startswith(PUBLIC_PREFIXES):
            headers.setdefault(hdrs.CACHE_CONTROL, "no-store")
        if request.get(NEW_BROWSER_ID):
            response.set_cookie(
                BROWSER_COOKIE,
                request[BROWSER_ID],
                max_age=BROWSER_COOKIE_MAX_AGE,
                path="/",
                httponly=True,
                samesite="Strict",
                secure=request.secure or None,
            )
            request[NEW_BROWSER_ID] = False

    # -- login and logout -----------------------------------------------------------------

    async def login(self, request: web.Request) -> web.StreamResponse:
        """POST /login: a form with the token sets the session cookie."""
        if self.throttled(request):
            return web.Response(status=429, text="Too many attempts; wait a minute.\n")
        form = await request.post()
        token = form.get("token")
        target = safe_next(str(form.get("next") or "/"))
        if not isinstance(token, str) or self._session is None or not self.token_matches(token):
            if self._session is not None:
                self.record_failure(request)
            return redirect(f"/login?failed=1&next={target}")
        response = redirect(target)
        response.set_cookie(
            AUTH_COOKIE,
            self._session,
            path="/",
            httponly=True,
            samesite="Strict",
            secure=request.secure or None,
        )
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        response = redirect("/login")
        response.del_cookie(AUTH_COOKIE, path="/")
        return response


def _recent(failures: deque[float], now: float) -> int:
    """Drop failures older than the login window; how many are left."""
    cutoff = now - LOGIN_WINDOW_SECONDS
    while failures and failures[0] < cutoff:
        failures.popleft()
    return len(failures)


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={hdrs.LOCATION: location})


def _refused(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=403)
