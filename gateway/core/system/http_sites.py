"""aiohttp servers behind the gateway's connection limits (:mod:`gateway.core.system.connections`).

Every HTTP server the gateway runs (the web server and its Unix socket, Slack's Events API,
Telegram's webhook) is an :func:`app_runner` served by a :class:`LimitedSite`, in place of
aiohttp's ``AppRunner`` with its ``TCPSite``/``UnixSite``: the same application, with each
connection admitted and timed by :class:`~gateway.core.system.connections.Admission`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from gateway.core.system.connections import Admission, ConnectionLimits


def app_runner(app: web.Application, limits: ConnectionLimits, **kwargs: Any) -> web.AppRunner:
    """aiohttp's runner for ``app``, whose kept-alive connections wait at most
    ``limits.head_seconds`` for their next request (aiohttp's default is an hour)."""
    return web.AppRunner(app, keepalive_timeout=limits.head_seconds, **kwargs)


class LimitedSite(web.BaseSite):
    """``TCPSite`` (``host``, ``port``) or ``UnixSite`` (``path``), each connection admitted
    by the limits. ``server`` names it in the log ("the web server")."""

    def __init__(
        self,
        runner: web.BaseRunner,
        limits: ConnectionLimits,
        server: str,
        *,
        host: str | None = None,
        port: int = 0,
        path: str | None = None,
    ) -> None:
        super().__init__(runner)
        self.admission = Admission(limits, server)
        self._host = host
        self._port = port
        self._path = path
        self.port: int | None = None  # the port bound (TCP)

    @property
    def name(self) -> str:
        if self._path is not None:
            return f"http://unix:{self._path}:"
        host = self._host or "0.0.0.0"  # noqa: S104 - a name, as TCPSite's
        return f"http://{host}:{self.port or self._port}"

    async def start(self) -> None:
        await super().start()  # registered with the runner (its addresses, its cleanup)
        server = self._runner.server
        assert server is not None  # runner.setup() made it
        factory = self.admission.wrap(server)
        loop = asyncio.get_running_loop()
        if self._path is not None:
            self._server = await loop.create_unix_server(factory, self._path)
            return
        listening = await loop.create_server(factory, self._host, self._port)
        self._server = listening
        self.port = int(listening.sockets[0].getsockname()[1])
