"""The settings' routes: read every setting, change some, restart the gateway.

* ``GET /api/settings``: the form as JSON (``sections``: each key with its value, type,
  allowed values, documentation, whether it applies live; secrets never included) and
  whether a restart can be asked for.
* ``POST /api/settings``: ``{"values": {"llm.model": "..."}, "check": false}``, and
  ``"clear": ["llm.api_key"]`` for secrets to remove (an empty secret keeps it); the
  answer is what the change did (:class:`gateway.web.view.SettingsChange`), 400 with
  ``errors`` when nothing was saved.
* ``GET /api/settings/form`` and ``POST /api/settings/form``: the same as the form of the
  settings page, rendered on the server (``{"html": ...}``; :mod:`settings_page`), and what
  the form posts (form-encoded, one input per dotted key). ``/settings`` itself is a page
  shell (gateway/web/control/routes.py): a navigation carries no page key, so no setting
  is in it; static/control/settings.js fetches the form and posts it with the key
  (gateway/web/access/security.py). A *Save* that went through answers with the form as it
  is now, what the save did above it, and ``done``: the id of that result, which the
  script puts in the page's address (``/settings?done=<id>``) and ``GET ...?done=<id>``
  shows again, so a reload shows it instead of posting the form again; *Check* and a
  refused *Save* answer with the form as typed.
* ``POST /api/restart``: stop, then start anew in a new process (the keys that wait for a
  restart); 409 when this gateway cannot (it was not started by ``switchboard run``).
  The page's button posts ``{"page": true}`` and is answered with the address of
  ``GET /settings/restarting``, which the page opens and which restarts nothing, so a
  reload is harmless. Its restart waits until that page has loaded (its script posts the
  one-time ``ticket`` the address carries), at most ``RESTART_GRACE_SECONDS`` (a page whose
  script did not run): the web server is the first part to stop, and the page would not
  load after it. The page then goes back to the settings once a new start of the gateway
  answers.
* ``GET /api/restart``: which start of the gateway answers (``{"start": "<id>"}``, new at
  every start), how the restarting page knows the new one is up.

Every route is behind the web guard like every page (gateway/web/access/security.py): only the
owner's session (its cookie and page key), the web token or the gateway's own user on the
local socket pass, and a state-changing request from a browser needs the server's own
``Origin``.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from gateway.config.reference.form import sections_json
from gateway.core.system.bodies import parse_json
from gateway.web.access.security import WebGuard, page_route
from gateway.web.control.settings_page import (
    CHECK,
    cleared,
    edited,
    restarting_page,
    settings_form,
)
from gateway.web.view import GatewayView, SettingsChange

KEPT_RESULTS = 20  # the latest saves' results a reloaded page can still show
RESTART_GRACE_SECONDS = 3.0  # the page's restart begins by then without its script
NOT_RESTARTABLE = (
    "Not restarted: this gateway was not started by `switchboard run`, so it cannot start "
    "itself again. Restart it where it runs."
)


@dataclass(frozen=True, slots=True)
class _PendingRestart:
    """A restart the page asked for, waiting for the restarting page to load."""

    ticket: str  # what that page posts once it has loaded
    timer: asyncio.TimerHandle  # the restart without it, after the grace


class SettingsRoutes:
    def __init__(self, gateway: GatewayView, guard: WebGuard) -> None:
        self._gateway = gateway
        self._guard = guard
        self._start = secrets.token_hex(8)  # this start of the gateway (GET /api/restart)
        self._results: dict[str, SettingsChange] = {}  # by the id a page's address names
        self._pending: _PendingRestart | None = None
        self._restarting: asyncio.Task[bool] | None = None  # held: a task is not kept else

    def routes(self) -> list[web.RouteDef]:
        return [
            page_route("/settings/restarting", self.restarting, name="restarting"),
            web.get("/api/settings/form", self.form),
            web.post("/api/settings/form", self.save_form),
            web.get("/api/settings", self.read),
            web.post("/api/settings", self.save),
            web.get("/api/restart", self.started),
            web.post("/api/restart", self.restart),
        ]

    async def read(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "sections": sections_json(self._gateway.settings_form()),
                "restart_offered": self._gateway.restart_offered(),
            }
        )

    async def save(self, request: web.Request) -> web.Response:
        try:
            body: Any = await request.json(loads=parse_json)
        except ValueError:
            body = None
        values = body.get("values", {}) if isinstance(body, dict) else None
        clear = body.get("clear", []) if isinstance(body, dict) else None
        if (
            not isinstance(values, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())
            or not isinstance(clear, list)
            or not all(isinstance(k, str) for k in clear)
        ):
            return web.json_response(
                {
                    "error": 'send {"values": {"dotted.key": "text", ...}, '
                    '"clear": ["secret.key", ...], "check": false}'
                },
                status=400,
            )
        change = await self._gateway.change_settings(
            values, by=self._who(request), check=body.get("check") is True, clear=clear
        )
        return web.json_response(_plain(change), status=400 if change.errors else 200)

    async def form(self, request: web.Request) -> web.Response:
        """The settings page's form, with what the save ``done`` names did above it."""
        html = settings_form(
            self._gateway.settings_form(),
            result=self._results.get(request.query.get("done", "")),
            restart_offered=self._gateway.restart_offered(),
        )
        return web.json_response({"html": html})

    async def save_form(self, request: web.Request) -> web.Response:
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        check = form.get("_action") == CHECK
        change = await self._gateway.change_settings(
            edited(form), by=self._who(request), check=check, clear=cleared(form)
        )
        if not check and not change.errors:
            done = self._keep(change)
            html = settings_form(
                self._gateway.settings_form(),
                result=change,
                restart_offered=self._gateway.restart_offered(),
            )
            return web.json_response({"html": html, "done": done})
        html = settings_form(
            self._gateway.settings_form(),
            result=change,
            checked=check,
            restart_offered=self._gateway.restart_offered(),
            posted=form,  # what was typed stays in the form until it is saved
        )
        return web.json_response({"html": html, "done": None}, status=400 if change.errors else 200)

    def _keep(self, change: SettingsChange) -> str:
        """Keep a save's result for the page's reload (``?done=``); returns its id."""
        ident = secrets.token_urlsafe(8)
        self._results[ident] = change
        while len(self._results) > KEPT_RESULTS:
            del self._results[next(iter(self._results))]
        return ident

    async def restarting(self, request: web.Request) -> web.Response:
        query = request.query
        return _html(restarting_page(query.get("from", ""), query.get("ticket", "")))

    async def started(self, request: web.Request) -> web.Response:
        return web.json_response({"start": self._start})

    async def restart(self, request: web.Request) -> web.Response:
        by = self._who(request)
        try:
            body: Any = await request.json(loads=parse_json) if request.can_read_body else None
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("page") is True:  # the settings page's button
            if not self._gateway.restart_offered():
                return web.json_response({"error": NOT_RESTARTABLE}, status=409)
            ticket_ = self._restart_soon(by)
            page = f"/settings/restarting?from={self._start}&ticket={ticket_}"
            return web.json_response({"page": page}, status=202)
        ticket: Any = body.get("ticket") if isinstance(body, dict) else None
        if isinstance(ticket, str):  # the restarting page has loaded
            pending = self._pending
            if pending is None or ticket != pending.ticket:
                return web.json_response({"error": "that restart began already"}, status=409)
            pending.timer.cancel()
            self._pending = None
        if not await self._gateway.restart(by=by):
            return web.json_response({"error": NOT_RESTARTABLE}, status=409)
        return web.json_response({"restarting": True}, status=202)

    def _restart_soon(self, by: str) -> str:
        """Restart once the restarting page has loaded, or after the grace; returns the
        page's ticket. Asked again meanwhile: one restart, with the new ticket."""
        if self._pending is not None:
            self._pending.timer.cancel()
        ticket = secrets.token_urlsafe(12)
        timer = asyncio.get_running_loop().call_later(RESTART_GRACE_SECONDS, self._restart_now, by)
        self._pending = _PendingRestart(ticket, timer)
        return ticket

    def _restart_now(self, by: str) -> None:
        self._pending = None
        self._restarting = asyncio.ensure_future(self._gateway.restart(by=by))

    async def forget_restart(self, app: web.Application) -> None:
        """The web server stops (``on_shutdown``): a restart still waiting is not made."""
        if self._pending is not None:
            self._pending.timer.cancel()
            self._pending = None

    def _who(self, request: web.Request) -> str:
        """Who asked, for the audit log: the owner, and how they signed in."""
        return f"web:owner ({self._guard.authenticate(request) or 'unknown'})"


def _plain(change: SettingsChange) -> dict[str, Any]:
    return asdict(change)


def _html(text: str, *, status: int = 200) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/html", charset="utf-8")
