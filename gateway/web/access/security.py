"""Who may use the web server, and from which pages.

Every request passes :meth:`WebGuard.middleware`:

* **Host check** (loopback binds): only ``localhost``/loopback names (and hosts of
  ``web.trusted_origins``) are served, so a page on another site that re-points its DNS
  name at 127.0.0.1 (DNS rebinding) gets nothing. It grants nothing: it only refuses.
* **Authentication**: nobody is the owner by where a connection comes from (an address, a
  port, a uid, a Host header). A request is the owner's when it presents a secret the gateway
  issued or the owner chose: a browser's session (below), which a one-time sign-in link
  begins (``switchboard run`` in a terminal and ``switchboard web`` print one:
  :mod:`gateway.web.access.signin`) or the login form with ``web.token``; ``Authorization:
  Bearer <web.token>``; or it comes over the gateway's Unix socket in the data directory,
  whose peer the kernel names (``SO_PEERCRED``: the gateway's own user, for the command
  line, :mod:`gateway.core.system.local_socket`). Sessions are random server-side ids that expire,
  are renewed with a new id as they are used, and end at logout or ``switchboard web
  --sign-out-all`` (:mod:`gateway.web.access.sessions`); what a page keeps open ends with
  its session (:mod:`gateway.web.access.streams`). Secrets are never read from a URL but the
  one-time code of a link. Every failed credential counts against the client's address, and
  a throttled client is refused before its credential is checked
  (:mod:`gateway.web.access.throttle`), unless it brings a valid session or sign-in link:
  those cannot be guessed, so a guesser sharing the owner's address (every local program,
  on a loopback bind) cannot lock the owner out.
* **A browser's session is bound to the origin** (scheme, host *and* port). Its HttpOnly
  ``SameSite=Strict`` cookie alone is not enough: cookies are kept per host, not per port,
  so a browser sends the cookie of ``127.0.0.1`` to any program listening on another port
  of it (another local user's, a sandboxed command with a network), which could replay it.
  So the sign-in also hands the page a *page key* in the body of its answer
  (:func:`gateway.web.access.login_page.signed_in_page`, never in a URL or a cookie), which
  the page keeps in the origin's ``localStorage``, readable by this server's pages alone;
  every request their scripts make carries it (:data:`KEY_HEADER`; a WebSocket, which
  takes no header from a page, offers it as the subprotocol ``switchboard.key.<key>``
  beside :data:`gateway.core.webhost.WEB_SOCKET_PROTOCOL`, the one it is answered with),
  and the server checks cookie and key together. A navigation cannot carry the key, so the
  only answers a cookie alone gets are the page *shells* (routes made with
  :func:`page_route`: static markup and scripts, nothing of the owner's), and every byte of
  data, every change and every socket needs the key. A cookie without its key (a cleared
  storage, another program) gets 401, and the page sends the browser to sign in again,
  saying why. Signing out needs the key too; the cookie alone only drops the cookie.
* **Cross-site protection**: state-changing requests and WebSocket upgrades need an
  ``Origin`` equal to the server's own (or a trusted one). A request without ``Origin`` is
  accepted only with a Bearer header or over the local socket, which no other site can make
  a browser use.
* **Webhooks** of a platform (WhatsApp) are exempt, path by path: the channel that serves
  them checks each request's signature before reading it.
* **Other programs** (``program_prefixes``: ``/hooks/``, ``/v1/``): every request there
  authenticates itself (a webhook's signature, an API token), so none of the checks above
  apply to it, and it gets no cookie. The web token and the login cookie open nothing there,
  and a webhook secret or API token opens nothing here.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Literal
from urllib.parse import urlsplit

from aiohttp import hdrs, web

from gateway.config.channels import WebSettings
from gateway.core.credentials import same_secret
from gateway.core.system.local_socket import is_gateway_user, peer_uid
from gateway.core.webhost import WEB_SOCKET_PROTOCOL
from gateway.web.access.login_page import (
    SIGN_IN_HINT,
    login_page,
    signed_in_page,
    used_link_page,
)
from gateway.web.access.sessions import WebSessions
from gateway.web.access.signin import SignInCodes
from gateway.web.access.streams import OpenStreams, Stream
from gateway.web.access.throttle import MAX_TRACKED_CLIENTS, LoginThrottle, client_address

AUTH_COOKIE = "switchboard_auth"
KEY_HEADER = "X-Switchboard-Key"  # a page's requests carry its sign-in's page key in it
KEY_PROTOCOL = "switchboard.key."  # a page's WebSocket offers its key as this subprotocol
PAGE_ROUTE = "page"  # the name (and prefix) of routes that serve a page shell
KEY_MISSING = (
    "this browser has the session cookie but not the page key of its sign-in (kept by the "
    "pages in this site's storage; cleared, or another browser profile): a cookie alone "
    "opens nothing, so sign in again: "
)
_SIGN_IN = web.RequestKey("sign_in", str)  # the sign-in a request's session continues
_STREAM = web.RequestKey("stream", Stream)  # what its handler keeps open, if anything

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# /logout checks its own credential: a page's sign-out ends the session, a cookie alone
# only takes the cookie out of its browser
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/login", "/logout", "/signin", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_NEXT_RE = re.compile(r"/[A-Za-z0-9/_-]*")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
TOO_MANY = "Too many failed attempts from your address; wait a minute.\n"
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


def page_route(path: str, handler: Handler, *, name: str) -> web.RouteDef:
    """``GET path``, a page *shell*: markup and scripts that hold nothing of the owner's
    (the scripts fetch the data with the page key). The one kind of answer a browser's
    session cookie gets without its key, as a navigation carries none."""
    return web.get(path, handler, name=f"{PAGE_ROUTE}.{name}")


def is_page(request: web.Request) -> bool:
    """Whether the request asks for a page shell (:func:`page_route`)."""
    if request.method not in SAFE_METHODS or is_websocket(request):
        return False
    name = getattr(request.match_info.route.resource, "name", None) or ""
    return name.startswith(f"{PAGE_ROUTE}.")


def page_key(request: web.Request) -> str:
    """The page key a request presents: its header, or a WebSocket's subprotocol. The
    subprotocol counts only beside :data:`WEB_SOCKET_PROTOCOL`, the one the handler answers
    with, as a page offers them (offered alone, aiohttp would log the subprotocols it was
    offered, the key among them)."""
    key = request.headers.get(KEY_HEADER, "")
    if key or not is_websocket(request):
        return key.strip()
    offered = [
        protocol.strip()
        for header in request.headers.getall(hdrs.SEC_WEBSOCKET_PROTOCOL, ())
        for protocol in header.split(",")
    ]
    if WEB_SOCKET_PROTOCOL not in offered:
        return ""
    keys = [p.removeprefix(KEY_PROTOCOL) for p in offered if p.startswith(KEY_PROTOCOL)]
    return keys[0] if keys else ""


def safe_next(value: str | None) -> str:
    """Where to go after login: a local path only (never ``//host`` or a full URL)."""
    if value and _NEXT_RE.fullmatch(value) and not value.startswith("//"):
        return value
    return "/"


Credential = Literal["socket", "bearer", "cookie"]


class WebGuard:
    def __init__(
        self,
        settings: WebSettings,
        *,
        sessions: WebSessions,
        sign_in: SignInCodes,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_TRACKED_CLIENTS,
        webhook_paths: frozenset[str] = frozenset(),
        program_prefixes: tuple[str, ...] = (),
    ):
        self._settings = settings
        self.sessions = sessions
        self._sign_in = sign_in
        # A platform's webhooks (gateway.core.webhost.ServesWebhooks), path by path, and
        # other programs' endpoints (ServesPrograms), by prefix: their handlers check each
        # request's own credential; no host, proxy, token or Origin rule applies.
        self._webhook_paths = webhook_paths
        self._programs = program_prefixes
        token = settings.token.get_secret_value().strip() if settings.token else ""
        self._token = token.encode() if token else None
        self._trusted = frozenset(settings.trusted_origins)
        self._trusted_hosts = frozenset(
            host_name(urlsplit(origin).netloc) for origin in settings.trusted_origins
        )
        self._proxies = tuple(
            ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies
        )
        self._throttle = LoginThrottle(clock=clock, max_clients=max_clients)
        self._streams = OpenStreams()

    @property
    def token_required(self) -> bool:
        return self._token is not None

    # -- checks ---------------------------------------------------------------------------

    def host_allowed(self, request: web.Request) -> bool:
        if not self._settings.loopback or self.over_local_socket(request):
            return True  # the token guards a network bind; any Host name may be used
        name = host_name(request.host)
        return is_loopback_name(name) or name in self._trusted_hosts

    def authenticate(self, request: web.Request) -> Credential | None:
        """Which secret the request presents, if a good one (see the module docstring)."""
        if self.owner_socket(request):
            return "socket"
        header = request.headers.get(hdrs.AUTHORIZATION, "")
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer" and credential:
            return "bearer" if self.token_matches(credential.strip()) else None
        if self.session_of(request) is not None:
            return "cookie"
        return None

    def session_of(self, request: web.Request) -> str | None:
        """The sign-in the request's session cookie continues, if the session is valid and
        the request presents its page key (see the module docstring)."""
        cookie = request.cookies.get(AUTH_COOKIE, "")
        key = page_key(request)
        return self.sessions.sign_in_with(cookie, key) if cookie and key else None

    def cookie_session(self, request: web.Request) -> str | None:
        """The sign-in the request's session cookie continues, with or without its page key:
        enough for a page shell, never for data."""
        cookie = request.cookies.get(AUTH_COOKIE, "")
        return self.sessions.sign_in_of(cookie) if cookie else None

    @staticmethod
    def over_local_socket(request: web.Request) -> bool:
        transport = request.transport
        sock = None if transport is None else transport.get_extra_info("socket")
        return sock is not None and sock.family == socket.AF_UNIX

    def owner_socket(self, request: web.Request) -> bool:
        """Whether the request came over the gateway's Unix socket from its own user: the
        kernel says who connected (fixed at connect time), and only that user can reach
        the socket's directory."""
        if not self.over_local_socket(request):
            return False
        assert request.transport is not None
        return is_gateway_user(peer_uid(request.transport.get_extra_info("socket")))

    @staticmethod
    def presents_credentials(request: web.Request) -> bool:
        """Whether the request tries to authenticate (a header or our cookie)."""
        return hdrs.AUTHORIZATION in request.headers or AUTH_COOKIE in request.cookies

    def token_matches(self, candidate: str) -> bool:
        return self._token is not None and same_secret(candidate, self._token)

    def same_origin(self, request: web.Request) -> bool:
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is None:
            return False
        origin = origin.strip().rstrip("/").lower()
        if origin in self._trusted:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == request.host.lower()

    def cross_site_refused(self, request: web.Request, how: Credential | None) -> bool:
        """Whether a state-changing request or socket must be refused as cross-site."""
        if request.method in SAFE_METHODS and not is_websocket(request):
            return False
        if hdrs.ORIGIN in request.headers:
            return not self.same_origin(request)
        # No Origin: not a browser. Only a Bearer header or the local socket (which a page
        # cannot make another site's browser use) is good enough; sockets need an Origin.
        return is_websocket(request) or how not in ("bearer", "socket")

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

    def refused_as_guessing(self, request: web.Request) -> bool:
        """Whether a browser's request is refused before its credential is checked: its
        address is throttled and it brings no valid session cookie. A session id (256
        random bits) cannot be guessed, so checking it first gives a guesser nothing, and
        the owner's browser keeps working, its page navigations (which carry no page key)
        too, while a program on the same address (on a loopback bind, every local one)
        guesses; what can be guessed, ``web.token``, is not checked."""
        return self.throttled(request) and self.cookie_session(request) is None

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
        path = request.path
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            if self.cross_site_refused(request, None) and request.method not in SAFE_METHODS:
                return _refused("cross-site request refused")
            return await handler(request)
        presented = self.presents_credentials(request)
        if presented and self.refused_as_guessing(request):
            return web.Response(status=429, text=TOO_MANY)  # before the token is checked
        how = self.authenticate(request)
        if how is None and self.cookie_session(request) is not None:
            # the session cookie without its page key: a page shell, nothing else. Not a
            # failed guess (a key cannot be guessed either), and the cookie stays: it is
            # the owner's browser whose storage was cleared, or a copy of the cookie.
            if is_page(request):
                return await handler(request)
            return self._without_key()
        if how is None:
            refusal = self._unauthenticated(request)
            if presented:
                self.record_failure(request)
                if AUTH_COOKIE in request.cookies:
                    refusal.del_cookie(AUTH_COOKIE, path="/")  # expired or revoked: stop
            return refusal
        if self.cross_site_refused(request, how):
            return _refused("cross-site request refused")
        if how != "cookie":
            return await handler(request)
        return await self._signed_in_request(request, handler)

    async def _signed_in_request(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        """A browser's request with its session: what the handler keeps open is tied to
        the sign-in (:meth:`prepare_stream`) until the handler is done, and a response sent
        at once may carry a new session id."""
        sign_in = self.session_of(request)
        if sign_in is not None:
            request[_SIGN_IN] = sign_in
        try:
            response = await handler(request)
        finally:
            stream = request.get(_STREAM)
            if stream is not None:
                self._streams.discard(stream)
        if not response.prepared:
            await self._renew(request, response)
        return response

    def _unauthenticated(self, request: web.Request) -> web.Response:
        wants_page = request.method == "GET" and "text/html" in request.headers.get(hdrs.ACCEPT, "")
        if wants_page and not is_websocket(request):
            return redirect(f"/login?next={safe_next(request.path)}")
        return web.json_response(
            {"error": f"sign in first: {SIGN_IN_HINT}"},
            status=401,
            headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="switchboard"'},
        )

    @staticmethod
    def _without_key() -> web.Response:
        """A session cookie without its page key asks for data: refused, saying why (the
        pages send the browser to sign in again)."""
        return web.json_response(
            {"error": KEY_MISSING + SIGN_IN_HINT, "sign_in": "key"},
            status=401,
            headers={hdrs.WWW_AUTHENTICATE: 'Bearer realm="switchboard"'},
        )

    def prepare_stream(self, request: web.Request, response: web.StreamResponse) -> None:
        """The ``Prepare`` of a response a handler keeps open (a WebSocket, an event
        stream), called before it is sent: the security headers, and, opened with a
        session, it is tied to that sign-in and ends with it (:meth:`end_streams`)."""
        self.decorate(request, response)
        sign_in = request.get(_SIGN_IN)
        if sign_in is not None:
            request[_STREAM] = self._streams.add(sign_in, request, response)

    def end_streams(self) -> int:
        """End what pages keep open under sign-ins that ended (signed out, expired); how
        many. Called at once where this server ends sessions, and every few seconds for
        the ones that expire (:class:`gateway.web.server.WebServer`)."""
        return self._streams.end(self.sessions.signed_in)

    def decorate(self, request: web.Request, response: web.StreamResponse) -> None:
        """Security headers (on a response a handler prepares itself: :meth:`prepare_stream`)."""
        headers = response.headers
        headers.setdefault("Content-Security-Policy", CSP)
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("X-Frame-Options", "DENY")
        headers.setdefault("Referrer-Policy", "same-origin")  # "no-referrer" makes Origin null
        headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
        if not request.path.startswith(PUBLIC_PREFIXES):
            headers.setdefault(hdrs.CACHE_CONTROL, "no-store")

    # -- signing in and out ---------------------------------------------------------------

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        """GET /login: how to sign in (the token form only where ``web.token`` is set)."""
        return login_page(
            token_form=self.token_required,
            failed=request.query.get("failed") == "1",
            next_path=safe_next(request.query.get("next")),
            key_lost=request.query.get("why") == "key",
        )

    async def login(self, request: web.Request) -> web.StreamResponse:
        """POST /login: a form with the token signs the browser in (:meth:`_signed_in`)."""
        if self.refused_as_guessing(request):
            return web.Response(status=429, text=TOO_MANY)
        form = await request.post()
        token = form.get("token")
        target = safe_next(str(form.get("next") or "/"))
        if not isinstance(token, str) or not self.token_matches(token):
            self.record_failure(request)
            return redirect(f"/login?failed=1&next={target}")
        return await self._signed_in(request, target)

    async def sign_in(self, request: web.Request) -> web.StreamResponse:
        """GET /signin?code=...: a one-time link of ``switchboard run`` or ``switchboard
        web`` signs the browser in (:mod:`gateway.web.access.signin`). A good link is
        never throttled: its code carries a keyed MAC, which cannot be guessed."""
        if self._sign_in.redeem(request.query.get("code", "")):
            return await self._signed_in(request, "/")
        if self.cookie_session(request) is not None:  # signed in already (by this link, say)
            return redirect("/")
        if self.throttled(request):
            return web.Response(status=429, text=TOO_MANY)
        self.record_failure(request)
        return used_link_page()

    async def _signed_in(self, request: web.Request, next_path: str) -> web.StreamResponse:
        """A new sign-in: its session's cookie, and a page that hands its page key to the
        origin's storage and goes on to ``next_path``. The key is in this answer's body
        alone (no URL, no cookie, never cached), which only the page that asked reads."""
        new = await self.sessions.create()
        response = signed_in_page(new.key, next_path)
        self._set_session_cookie(request, response, new.session)
        return response

    def _set_session_cookie(
        self, request: web.Request, response: web.StreamResponse, session: str
    ) -> None:
        response.set_cookie(
            AUTH_COOKIE,
            session,
            max_age=int(self.sessions.lifetime_seconds),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=request.secure or None,
        )

    async def _renew(self, request: web.Request, response: web.StreamResponse) -> None:
        """A session in use gets a new id now and then (a stolen old one dies soon)."""
        renewed = await self.sessions.renew(request.cookies.get(AUTH_COOKIE, ""))
        if renewed is not None:
            self._set_session_cookie(request, response, renewed)

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """POST /logout (a public path, same ``Origin`` only): with the page key, the
        sign-in ends on the server too, so a copied cookie is dead. The cookie alone (a
        form without the page's script, or a copy of the cookie) ends nothing: it only
        takes the cookie out of the browser that sent it."""
        session = request.cookies.get(AUTH_COOKIE)
        if session and self.session_of(request) is not None:
            await self.sessions.revoke(session)
            self.end_streams()  # this browser's other tabs: their chat stops at once
        response = redirect("/login")
        response.del_cookie(AUTH_COOKIE, path="/")
        return response

    async def follow_sign_outs(self) -> bool:
        """Whether another process signed everyone out (``switchboard web --sign-out-all``
        against a cluster's store) since the last look: then the sessions here have ended
        and the sign-in links made until now no longer work."""
        if not await self.sessions.signed_out_elsewhere():
            return False
        self._sign_in.forget_links()
        self.end_streams()
        return True

    async def sign_out_all(self, request: web.Request) -> web.StreamResponse:
        """POST /api/sessions/sign-out-all (``switchboard web --sign-out-all``): every
        browser's session ends, and every sign-in link not used yet stops working."""
        ended = await self.sessions.revoke_all()
        self._sign_in.forget_links()
        self.end_streams()
        response = web.json_response({"signed_out": ended})
        if AUTH_COOKIE in request.cookies:
            response.del_cookie(AUTH_COOKIE, path="/")
        return response


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={hdrs.LOCATION: location})


def _refused(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=403)
