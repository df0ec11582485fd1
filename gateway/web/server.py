"""The HTTP server of ``switchboard run``: the web chat, the owner's control center, health
and metrics.

``/healthz`` is liveness (the process and its store answer); ``/readyz`` is readiness (the
store answers and a channel is connected), for supervisors and load balancers. Both are
public and say nothing but up or down and which channel is connected.

It runs on the gateway's own event loop (aiohttp). It starts only when the gateway was
built with a channel that serves web routes (the web chat, which ``switchboard run`` adds
when ``web.enabled``); ``switchboard chat``, tests and benchmarks that build a Gateway
without it never open a port. Pages are static files shipped in ``gateway/web/static``;
data comes from JSON endpoints and is rendered in the browser without HTML injection. The
control center's sections (gateway/web/control/routes.py) replaced the status page: ``/status``
leads to ``/health``, and ``/api/status`` stays for ``switchboard status``.

On a cluster node that does not lead, the server starts *limited* (``standby=True``): only
``/healthz`` and the routes of the channels that receive on every node (WhatsApp's webhook,
the signed hooks: :class:`gateway.core.channel.ReceivesOnEveryNode`) are served; everything
else answers 503 (``/readyz`` too, so a load balancer checking it sends browsers and the API
to the leader). :meth:`WebServer.serve_all` lifts that once the node leads.

Under a program's prefix (``/v1/``, ``/hooks/``) every error is in that program's format
(:meth:`WebServer._program_errors`), also those no handler of its answers: an unknown path,
a wrong method, the standby's 503, a handler that failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.core.channel import ReceivesOnEveryNode
from gateway.core.errors import ConfigError, StoreError
from gateway.core.system.http_sites import LimitedSite, app_runner
from gateway.core.system.local_socket import reachable
from gateway.core.webhost import ServesPrograms, ServesWeb, ServesWebhooks
from gateway.core.workspace_files import read as read_workspace
from gateway.web.access.security import Handler, WebGuard, page_route
from gateway.web.access.sessions import WebSessions
from gateway.web.access.signin import SignInCodes, ensure_key, sign_in_link
from gateway.web.control.routes import ControlRoutes
from gateway.web.control.settings import SettingsRoutes
from gateway.web.endpoint import remove_endpoint, socket_path, write_endpoint
from gateway.web.metrics import CONTENT_TYPE, GatewayMetrics
from gateway.web.pages import STATIC_DIR, static_page
from gateway.web.serving import program_channels, web_channels, webhook_channels
from gateway.web.status import readiness, snapshot
from gateway.web.traces import find_trace, read_events

if TYPE_CHECKING:
    from gateway.store import PairingRequest
    from gateway.web.view import GatewayView

log = logging.getLogger(__name__)

# how soon a sign-out of everyone from another process applies, and an expired session's
# open pages close
SESSION_CHECK_SECONDS = 5.0


def every_node_paths(gateway: GatewayView) -> tuple[frozenset[str], tuple[str, ...]]:
    """The webhook paths and program prefixes a cluster node serves while it does not lead."""
    every = [c for c in gateway.channels.values() if isinstance(c, ReceivesOnEveryNode)]
    paths = frozenset(
        _path_of(route)
        for channel in every
        if isinstance(channel, ServesWebhooks)
        for route in channel.webhook_routes()
    )
    prefixes = tuple(c.program_prefix for c in every if isinstance(c, ServesPrograms))
    return paths, prefixes


class WebServer:
    def __init__(self, gateway: GatewayView, *, standby: bool = False) -> None:
        self._gateway = gateway
        self._standby = standby
        self._every_node = every_node_paths(gateway)
        self.settings = gateway.settings.web
        self._limits = gateway.settings.limits.connection_limits()
        token = self.settings.token.get_secret_value().strip() if self.settings.token else ""
        sessions = WebSessions(
            token.encode(),
            lifetime_seconds=self.settings.session_hours * 3600.0,
            kv=gateway.store.kv,
        )
        self._webhooks = [
            route for channel in webhook_channels(gateway) for route in channel.webhook_routes()
        ]
        self._programs = program_channels(gateway)
        self._sign_in_key = ensure_key(gateway.settings.data_dir)
        self.guard = WebGuard(
            self.settings,
            sessions=sessions,
            webhook_paths=frozenset(_path_of(route) for route in self._webhooks),
            program_prefixes=tuple(p.program_prefix for p in self._programs),
            sign_in=SignInCodes(self._sign_in_key),
        )
        self.metrics = GatewayMetrics(gateway)
        self.control = ControlRoutes(gateway, self.guard.prepare_stream)
        self._runner: web.AppRunner | None = None
        self._session_checks: asyncio.Task[None] | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        host = self.settings.host
        shown = "127.0.0.1" if host in ("", "0.0.0.0") else host  # noqa: S104 - display only
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{self.port}/"

    def sign_in_link(self) -> str:
        """A one-time link that signs a browser in (what ``switchboard web`` prints)."""
        return sign_in_link(self._sign_in_key, self.url)

    async def start(self) -> None:
        if not self.settings.loopback and not self.guard.token_required:
            raise ConfigError(  # settings refuse this already; never serve without it
                f"web.host {self.settings.host!r} is not loopback: set web.token "
                "(SWITCHBOARD_WEB__TOKEN)",
                field="web.token",
            )
        await self.guard.sessions.load()
        await self.metrics.start()
        runner = app_runner(self._app(), self._limits, handle_signals=False, access_log=None)
        await runner.setup()
        site = LimitedSite(
            runner, self._limits, "the web server", host=self.settings.host, port=self.settings.port
        )
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise self.settings.listener().refused(exc) from exc
        self._runner = runner
        self.port = site.port
        await self._listen_locally(runner)
        write_endpoint(self._gateway.settings.data_dir, self.url)
        self._session_checks = asyncio.create_task(self._check_sessions())
        log.info("web chat and control center on %s", self.url)

    async def _check_sessions(self) -> None:
        """Every few seconds: what pages keep open under an expired session ends; and with
        a store other processes share, did `switchboard web --sign-out-all` sign everyone
        out from another process (a cluster's)? On SQLite the command reaches this one."""
        shared = self._gateway.settings.storage.url is not None
        while True:
            await asyncio.sleep(SESSION_CHECK_SECONDS)
            self.guard.end_streams()
            if not shared:
                continue
            try:
                if await self.guard.follow_sign_outs():
                    log.info("every browser signed out (switchboard web --sign-out-all)")
            except StoreError as exc:
                log.debug("sign-outs not checked now: %s", exc)

    async def _listen_locally(self, runner: web.AppRunner) -> None:
        """The same application on a Unix socket in the data directory, for the command
        line (``switchboard status``): the kernel names who connects (gateway.web.access.security)."""
        path = socket_path(self._gateway.settings.data_dir)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.unlink(missing_ok=True)  # left by a crash; the data directory's lock is ours
        with reachable(path) as name:
            await LimitedSite(runner, self._limits, "the web server's socket", path=name).start()
        path.chmod(0o600)  # only the gateway's user (and root) may connect

    def serve_all(self) -> None:
        """This node leads now and every channel is started: serve every route."""
        self._standby = False

    @web.middleware
    async def _program_errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Under a program's prefix, what the server itself would answer in plain text (404
        for a path no route has, 405 for a method its route does not take) or not at all (a
        handler's exception: aiohttp's bare 500) is answered in the program's format."""
        program = self._program_at(request.path)
        if program is None:
            return await handler(request)
        try:
            return await handler(request)
        except web.HTTPException as error:
            if error.status < 400:  # a redirect is no error
                raise
            return program.program_error(request, error)
        except Exception:
            if request.writer.output_size > 0:  # a response has begun: no other one now
                raise
            log.exception("%s %s failed", request.method, request.path)
            return program.program_error(request, web.HTTPInternalServerError())

    def _program_at(self, path: str) -> ServesPrograms | None:
        """The program whose prefix ``path`` is under, if any."""
        return next((p for p in self._programs if path.startswith(p.program_prefix)), None)

    @web.middleware
    async def _standby_filter(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """While the node does not lead: liveness and what every node receives, nothing else."""
        if not self._standby or request.path == "/healthz":
            return await handler(request)
        paths, prefixes = self._every_node
        if request.path in paths or (prefixes and request.path.startswith(prefixes)):
            return await handler(request)
        if self._program_at(request.path) is not None:  # in its format (_program_errors)
            raise web.HTTPServiceUnavailable(
                text="this node does not lead the cluster: the leader serves this",
                headers={"Retry-After": "5"},
            )
        return web.json_response(
            {
                "error": "this node does not lead the cluster: the leader serves this",
                "ready": False,
            },
            status=503,
            headers={"Retry-After": "5"},
        )

    async def stop(self) -> None:
        if self._session_checks is not None:
            self._session_checks.cancel()
            await asyncio.gather(self._session_checks, return_exceptions=True)
            self._session_checks = None
        if self._runner is None:
            return
        self.control.close()  # the control center's event streams end
        closing: list[ServesWeb | ServesPrograms] = [*web_channels(self._gateway), *self._programs]
        for channel in closing:
            try:
                await channel.close_web()
            except Exception:
                log.exception("closing web connections failed")
        await self._runner.cleanup()
        self._runner = None
        remove_endpoint(self._gateway.settings.data_dir)
        with contextlib.suppress(OSError):
            socket_path(self._gateway.settings.data_dir).unlink()

    # -- the application ------------------------------------------------------------------

    def _app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._program_errors, self._standby_filter, self.guard.middleware],
            client_max_size=1024**2,
        )
        add = app.router.add_route
        app.router.add_routes(
            [  # shells: their scripts fetch the data with the page key (gateway/web/pages.py)
                page_route("/", _static_page("chat.html", ""), name="chat"),
                page_route("/status", _moved("/health"), name="status"),  # it became Health
                page_route("/trace/{turn_id}", _static_page("trace.html", "health"), name="trace"),
            ]
        )
        add("GET", "/login", self.guard.login_page)
        add("POST", "/login", self.guard.login)
        add("POST", "/logout", self.guard.logout)
        add("GET", "/signin", self.guard.sign_in)
        add("GET", "/healthz", self._healthz)
        add("GET", "/readyz", self._readyz)
        add("GET", "/metrics", self._metrics)
        add("GET", "/api/status", self._status)
        add("GET", "/api/traces/{turn_id}", self._trace)
        add("POST", "/api/pairing/{code}/{action}", self._pairing)
        add("POST", "/api/sessions/sign-out-all", self.guard.sign_out_all)
        add("GET", "/api/workspace/{name:.+}", self._workspace_file)
        settings_routes = SettingsRoutes(self._gateway, self.guard)
        app.router.add_routes(settings_routes.routes())
        app.on_shutdown.append(settings_routes.forget_restart)
        app.router.add_routes(self.control.routes())
        app.router.add_static("/static/", STATIC_DIR, follow_symlinks=False)
        # Browsers ask for /favicon.ico on every page whatever the page links to.
        add("GET", "/favicon.ico", _icon)
        for channel in web_channels(self._gateway):
            app.router.add_routes(channel.web_routes(self.guard.prepare_stream))
        app.router.add_routes(self._webhooks)
        prefixes = tuple(p.program_prefix for p in self._programs)
        for resource in app.router.resources():  # the guard lets requests there through
            if prefixes and resource.canonical.startswith(prefixes):
                raise ValueError(f"{resource.canonical} would be served under {prefixes}")
        for program in self._programs:
            routes = program.program_routes(self.guard)
            for route in routes:
                if not _path_of(route).startswith(program.program_prefix):
                    raise ValueError(f"{_path_of(route)} is outside {program.program_prefix}")
            app.router.add_routes(routes)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        """For process supervisors: no auth, nothing but up, degraded or down. Degraded
        (200: the process recovers by itself, do not restart it): a cluster node that lost
        its database pauses and reconnects."""
        problem = self._gateway.degraded()
        if problem is not None:
            return web.json_response({"status": "degraded", "reason": problem})
        try:
            async with asyncio.timeout(5):
                await self._gateway.store.journal.counts()
        except Exception:
            return web.json_response({"status": "unavailable"}, status=503)
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        """Ready: the store answers and a channel is connected (see :func:`readiness`)."""
        state = await readiness(self._gateway, [*web_channels(self._gateway), *self._programs])
        return web.json_response(state, status=200 if state["ready"] else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        body = await self.metrics.render()
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE
        return response

    async def _status(self, request: web.Request) -> web.Response:
        await self.metrics.refresh()
        data = await snapshot(self._gateway)
        data["auth"] = "token" if self.guard.token_required else "link"
        return web.json_response(data)

    async def _trace(self, request: web.Request) -> web.Response:
        turn_id = request.match_info["turn_id"]
        directory = self._gateway.settings.data_dir / "traces"
        path = await asyncio.to_thread(find_trace, directory, turn_id)
        if path is None:
            return web.json_response({"error": "no trace for this turn"}, status=404)
        events = await asyncio.to_thread(read_events, path)
        return web.json_response({"turn_id": turn_id, "day": path.parent.name, "events": events})

    async def _pairing(self, request: web.Request) -> web.Response:
        """Approve or deny a pairing code (everyone past the guard is the owner); ``owner``
        approves the owner's own code, from an account of theirs: that address becomes an
        owner of its channel (as ``switchboard pairing approve --owner``)."""
        code = request.match_info["code"]
        action = request.match_info["action"]
        if action not in ("approve", "owner", "deny"):
            return web.json_response({"error": "action is approve, owner or deny"}, status=404)
        result = await self._gateway.decide_pairing(code, approve=action != "deny", by="web:owner")
        if result is None:
            return web.json_response(
                {"error": f"no pending request with code {code.upper()}"}, status=404
            )
        problem = await self._make_owner(result) if action == "owner" else None
        if problem is not None:
            error = f"approved as a member; not made an owner: {problem}"
            return web.json_response({"error": error}, status=400)
        return web.json_response(
            {"code": result.code, "state": result.state, "channel": result.channel}
        )

    async def _make_owner(self, approved: PairingRequest) -> str | None:
        """Add the approved address to its channel's ``owners`` (config.toml, applied
        live); why not, or ``None``."""
        section = self._gateway.settings.channel_sections().get(approved.channel)
        if section is None:
            return f"{approved.channel} has no settings to name an owner in"
        owners = [*section.owners, approved.sender_id]
        change = await self._gateway.change_settings(
            {f"{approved.channel}.owners": json.dumps(owners)}, by="web:owner"
        )
        return "; ".join(change.errors.values()) if change.errors else None

    async def _workspace_file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        found = await asyncio.to_thread(read_workspace, self._gateway.settings.workspace_dir, name)
        if found is None:
            return web.json_response({"error": "not a bootstrap, memory or skill file"}, status=404)
        return web.json_response(
            {"name": name, "text": found.text, "digest": found.digest, "whole": found.whole}
        )


async def _icon(request: web.Request) -> web.StreamResponse:
    """The page icon, also where browsers look without being told (no 404 on every load)."""
    return web.FileResponse(STATIC_DIR / "icon.svg", headers={"Content-Type": "image/svg+xml"})


def _path_of(route: web.RouteDef) -> str:
    return route.path


def _static_page(name: str, current: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def serve(request: web.Request) -> web.StreamResponse:
        return static_page(name, current)

    return serve


def _moved(location: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def serve(request: web.Request) -> web.StreamResponse:
        return web.Response(status=303, headers={"Location": location})

    return serve
