"""Webhook mode: an aiohttp endpoint that answers 200 only after the update is journaled.

Why not PTB's built-in tornado server: it puts the update on ``Application.update_queue``
and answers 200 at once, so an update Telegram considers delivered may be lost in a crash
before any handler runs. Here the request handler itself converts the update and awaits
the gateway's ``publish_inbound``; only then does Telegram get its 200. Any failure before
that answers 500, and Telegram delivers the update again later.

Requests without the right ``X-Telegram-Bot-Api-Secret-Token`` are refused with 403 before
their body is read. Bodies that are not a valid update are answered 200 and dropped (the
sender proved it knows the secret, so this is Telegram; redelivery would not fix the body).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from telegram import Bot, Update

from gateway.core.credentials import same_secret
from gateway.core.system.connections import ConnectionLimits
from gateway.core.system.http_sites import LimitedSite, app_runner

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name
MAX_BODY = 1_000_000  # updates are small; files are fetched separately

Handler = Callable[[Update], Awaitable[None]]


class WebhookServer:
    def __init__(
        self,
        bot: Bot,
        handle: Handler,
        *,
        secret: str,
        listen: str,
        port: int,
        path: str,
        limits: ConnectionLimits,
    ) -> None:
        self._bot = bot
        self._limits = limits
        self._handle = handle
        self._secret = secret.encode()
        self._listen = listen
        self._port = port
        self.path = "/" + path.strip("/")
        self._runner: web.AppRunner | None = None
        self.port = port

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self.path, self._receive)
        self._runner = app_runner(app, self._limits, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = LimitedSite(
            self._runner, self._limits, "telegram webhook", host=self._listen, port=self._port
        )
        await site.start()
        self.port = site.port or self._port
        log.info("telegram webhook listening on %s:%d%s", self._listen, self.port, self.path)

    async def stop(self) -> None:
        """Stop accepting; requests already inside ``publish_inbound`` finish first."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        if not same_secret(request.headers.get(SECRET_HEADER, ""), self._secret):
            log.warning("telegram webhook: refused a request without the right secret token")
            return web.Response(status=403, text="forbidden")
        try:
            data = await request.json()
            update = Update.de_json(data, self._bot)
        except Exception as exc:  # malformed: redelivery would not help
            log.warning("telegram webhook: dropping an unreadable update: %s", exc)
            return web.Response(text="ignored")
        try:
            await self._handle(update)
        except Exception:
            log.exception("telegram webhook: update %s not accepted", update.update_id)
            return web.Response(status=500, text="not accepted, send it again")
        return web.Response(text="ok")
