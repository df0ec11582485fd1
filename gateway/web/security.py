"""Who may use the web server, and from which pages.

Every request passes :meth:`WebGuard.middleware`:

* **Host check** (loopback binds): only ``localhost``/loopback names (and hosts of
  ``web.trusted_origins``) are served, so a page on another site that re-points its DNS
  name at 127.0.0.1 (DNS rebinding) gets nothing.
* **Authentication**: with ``web.token`` set, a request needs ``Authorization: Bearer
  <token>`` or the HttpOnly ``SameSite=Strict`` cookie the login form sets (a random
  server-side session id that expires and ends at logout: :mod:`gateway.web.sessions`).
  The token is never read from a URL. Every failed credential counts against the client's
  address, and a throttled client is refused before its credential is checked
  (:mod:`gateway.web.throttle`). Without a token the server is bound to loopback (settings
  refuse anything else) and the owner is the user who runs the gateway: a connection whose
  socket that uid made (:mod:`gateway.web.peer`; the gateway's networked sandboxes cannot
  connect at all, :mod:`gateway.core.portguard`), or a browser holding a session from a
  one-time link of ``switchboard web`` (:mod:`gateway.web.signin`). Anyone else (another
  uid on the machine) gets 401 and is told to run ``switchboard web``; a request that came
  through a proxy is refused.
* **Cross-site protection**: state-changing requests and WebSocket upgrades need an
  ``Origin`` equal to the server's own (or a trusted one). A request without ``Origin`` is
  accepted only with a Bearer header, which no other site can make a browser send.
* **Webhooks** of a platform (WhatsApp) are exempt, path by path: the channel that serves
  them checks each request's signature before reading it.
* **Browser id**: each browser gets a random id in an HttpOnly cookie; the web chat keys its
  session on it. It never appears in a URL.
* **Other programs** (``program_prefixes``: ``/hooks/``, ``/v1/``): every request there
  authenticates itself (a webhook's signature, an API token), so none of the checks above
  apply to it, and it gets no cookie. The web token and the login cookie open nothing there,
  and a webhook secret or API token opens nothing here.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import hdrs, web

from gateway.config.channels import WebSettings
from gateway.core.webhost import BROWSER_ID
from gateway.web.peer import peer_uid
from gateway.web.sessions import WebSessions
from gateway.web.signin import SignInCodes
from gateway.web.throttle import MAX_TRACKED_CLIENTS, LoginThrottle, client_address

AUTH_COOKIE = "switchboard_auth"
BROWSER_COOKIE = "switchboard_browser"
NEW_BROWSER_ID = web.RequestKey("switchboard_new_browser_id", bool)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/login", "/signin", "/favicon.ico"})
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
TOO_MANY = "Too many failed attempts from your address; wait a minute.\n"
NOT_THE_OWNER = (
    "This web chat belongs to the user who runs Switchboard. As that user, run "
    "`switchboard web` and open the sign-in link it prints."
)
BAD_LINK = "This sign-in link is used up, expired or wrong; run `switchboard web` for a new one.\n"

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
        sessions: WebSessions | None = None,
        webhook_paths: frozenset[str] = frozenset(),
        program_prefixes: tuple[str, ...] = (),
        owner_uid: int | None = None,
        sign_in: SignInCodes | None = None,
    ):
        self._settings = settings
        # Without a token: whose connections are the owner's (None: nobody's; they sign in
        # with a link of `switchboard web`, checked by ``sign_in``).
        self._owner_uid = owner_uid
        self._sign_in = sign_in
        # A platform's webhooks (gateway.core.webhost.ServesWebhooks), path by path, and
        # other programs' endpoints (ServesPrograms), by prefix: their handlers check each
        # request's own credential; no host, proxy, token or Origin rule applies.
        self._webhook_paths = webhook_paths
        self._programs = program_prefixes
        token = settings.token.get_secret_value().strip() if settings.token else ""
        self._token = token.encode() if token else None
        lifetime = settings.session_hours * 3600.0
        self.sessions = sessions or WebSessions(self._token or b"", lifetime_seconds=lifetime)
        self._trusted = frozenset(settings.trusted_origins)
        self._trusted_hosts = frozenset(
            host_name(urlsplit(origin).netloc) for origin in settings.trusted_origins
        )
        self._proxies = tuple(
            ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies
        )
        self._throttle = LoginThrottle(clock=clock, max_clients=max_clients)

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
            cookie = request.cookies.get(AUTH_COOKIE, "")
            if cookie and self.sessions.valid(cookie):
                return "cookie"
            return "local" if self.owner_connects(request) else None
        header = request.headers.get(hdrs.AUTHORIZATION, "")
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer" and credential:
            return "bearer" if self.token_matches(credential.strip()) else None
        cookie = request.cookies.get(AUTH_COOKIE, "")
        if cookie and self.sessions.valid(cookie):
            return "cookie"
        return None

    def owner_connects(self, request: web.Request) -> bool:
        """Whether the connection's socket belongs to the uid that runs the gateway."""
        if self._owner_uid is None or request.transport is None:
            return False
        transport = request.transport
        uid = peer_uid(transport.get_extra_info("peername"), transport.get_extra_info("sockname"))
        return uid is not None and uid == self._owner_uid

    @staticmethod
    def presents_credentials(request: web.Request) -> bool:
        """Whether the request tries to authenticate (a header or our cookie)."""
        return hdrs.AUTHORIZATION in request.headers or AUTH_COOKIE in request.cookies

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
        return self._throttle.tracked_clients

    def client(self, request: web.Request) -> str:
        """The client's address (behind a trusted proxy: the one it forwarded)."""
        return client_address(request, self._proxies)

    def throttled(self, request: web.Request) -> bool:
        return self._throttle.throttled(self.client(request))

    def record_failure(self, request: web.Request) -> None:
        self._throttle.record_failure(self.client(request))

    # -- middleware -----------------------------------------------------------------------

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await self._checked(request, handler)
        if not response.prepared:
            self.decorate(request, response)
        return response

    async def _checked(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in self._webhook_paths or (
            self._programs and request.path.startswith(self._programs)
        ):
            return await handler(request)  # it checks its own credential (gateway.core.webhost)
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
        presented = self.presents_credentials(request)
        if presented and self.throttled(request):
            return web.Response(status=429, text=TOO_MANY)  # before the credential is checked
        how = self.authenticate(request)
        if how is None:
            response = self._unauthenticated(request)
            if presented:
                self.record_failure(request)
                if AUTH_COOKIE in request.cookies:
                    response.del_cookie(AUTH_COOKIE, path="/")  # expired or revoked: stop
            return response
        if self.cross_site_refused(request, how):
            return _refused("cross-site request refused")
        self._identify_browser(request)
        return await handler(request)

    def _unauthenticated(self, request: web.Request) -> web.Response:
        if self._token is None:
            if "text/html" in request.headers.get(hdrs.ACCEPT, ""):  # a person, in a browser
                return web.Response(status=401, text=NOT_THE_OWNER + "\n")
            return web.json_response({"error": NOT_THE_OWNER}, status=401)
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
            return web.Response(status=429, text=TOO_MANY)
        form = await request.post()
        token = form.get("token")
        target = safe_next(str(form.get("next") or "/"))
        if self._token is None:
            return redirect(f"/login?failed=1&next={target}")  # no token: nothing to log in to
        if not isinstance(token, str) or not self.token_matches(token):
            self.record_failure(request)
            return redirect(f"/login?failed=1&next={target}")
        return await self._signed_in(request, redirect(target))

    async def sign_in(self, request: web.Request) -> web.StreamResponse:
        """GET /signin?code=...: a one-time link of ``switchboard web`` sets the session
        cookie (:mod:`gateway.web.signin`)."""
        if self.throttled(request):
            return web.Response(status=429, text=TOO_MANY)
        code = request.query.get("code", "")
        if self._sign_in is None or not self._sign_in.redeem(code):
            self.record_failure(request)
            return web.Response(status=403, text=BAD_LINK)
        return await self._signed_in(request, redirect("/"))

    async def _signed_in(
        self, request: web.Request, response: web.StreamResponse
    ) -> web.StreamResponse:
        """``response`` with a new session's cookie: the browser is signed in from now on."""
        response.set_cookie(
            AUTH_COOKIE,
            await self.sessions.create(),
            max_age=int(self.sessions.lifetime_seconds),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=request.secure or None,
        )
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """POST /logout: the session ends on the server too, so a copied cookie is dead."""
        session = request.cookies.get(AUTH_COOKIE)
        if session:
            await self.sessions.revoke(session)
        response = redirect("/login")
        response.del_cookie(AUTH_COOKIE, path="/")
        return response


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={hdrs.LOCATION: location})


def _refused(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=403)
