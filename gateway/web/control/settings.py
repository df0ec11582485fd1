"""The settings' routes: read every setting, change some, restart the gateway.

* ``GET /api/settings``: the form as JSON (``sections``: each key with its value, type,
  allowed values, documentation, whether it applies live; secrets never included) and
  whether a restart can be asked for.
* ``POST /api/settings``: ``{"values": {"llm.model": "..."}, "check": false}``; the answer
  is what the change did (:class:`gateway.web.view.SettingsChange`), 400 with ``errors``
  when nothing was saved.
* ``GET /settings`` and ``POST /settings``: the same as a server-rendered page and its
  form (form-encoded, one input per dotted key).
* ``POST /api/restart``: stop, then start anew in a new process (the keys that wait for a
  restart); 409 when this gateway cannot (it was not started by ``switchboard run``).

Every route is behind the web guard like every page (gateway/web/access/security.py): only the
owner's session, the web token or the gateway's own user on the local socket pass, and a
state-changing request from a browser needs the server's own ``Origin``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aiohttp import web

from gateway.config.reference.form import sections_json
from gateway.web.access.security import WebGuard
from gateway.web.control.settings_page import CHECK, edited, restarting_page, settings_page
from gateway.web.view import GatewayView, SettingsChange


class SettingsRoutes:
    def __init__(self, gateway: GatewayView, guard: WebGuard) -> None:
        self._gateway = gateway
        self._guard = guard

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/settings", self.page),
            web.post("/settings", self.save_form),
            web.get("/api/settings", self.read),
            web.post("/api/settings", self.save),
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
            body: Any = await request.json()
        except ValueError:
            body = None
        values = body.get("values") if isinstance(body, dict) else None
        if not isinstance(values, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in values.items()
        ):
            return web.json_response(
                {"error": 'send {"values": {"dotted.key": "text", ...}, "check": false}'},
                status=400,
            )
        change = await self._gateway.change_settings(
            values, by=self._who(request), check=body.get("check") is True
        )
        return web.json_response(_plain(change), status=400 if change.errors else 200)

    async def page(self, request: web.Request) -> web.Response:
        return _html(
            settings_page(
                self._gateway.settings_form(), restart_offered=self._gateway.restart_offered()
            )
        )

    async def save_form(self, request: web.Request) -> web.Response:
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        check = form.get("_action") == CHECK
        change = await self._gateway.change_settings(
            edited(form), by=self._who(request), check=check
        )
        page = settings_page(
            self._gateway.settings_form(),
            result=change,
            checked=check,
            restart_offered=self._gateway.restart_offered(),
            # what was typed stays in the form until it is saved
            posted=form if check or change.errors else None,
        )
        return _html(page, status=400 if change.errors else 200)

    async def restart(self, request: web.Request) -> web.Response:
        started = await self._gateway.restart(by=self._who(request))
        if request.content_type == "application/x-www-form-urlencoded":  # the page's button
            return _html(restarting_page(), status=202 if started else 409)
        if not started:
            return web.json_response(
                {"error": "this gateway was not started by `switchboard run`: restart it there"},
                status=409,
            )
        return web.json_response({"restarting": True}, status=202)

    def _who(self, request: web.Request) -> str:
        """Who asked, for the audit log: the owner, and how they signed in."""
        return f"web:owner ({self._guard.authenticate(request) or 'unknown'})"


def _plain(change: SettingsChange) -> dict[str, Any]:
    return asdict(change)


def _html(text: str, *, status: int = 200) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/html", charset="utf-8")
