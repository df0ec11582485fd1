"""The gateway's HTTP side: web chat page, status page, ``/healthz`` and ``/metrics``.

:class:`WebServer` is started by :class:`gateway.runtime.app.Gateway` when it has a channel that
serves web routes (see :mod:`gateway.web.server`); security lives in
:mod:`gateway.web.security`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.core.webhost import ServesWeb
from gateway.web.server import WebServer, web_channels

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

__all__ = ["ServesWeb", "WebServer", "start_web"]


async def start_web(gateway: GatewayView) -> WebServer | None:
    """Start the web server if the gateway has a channel that serves web pages.

    ``switchboard run`` adds the web chat when ``web.enabled``; a Gateway built without it
    (``switchboard chat``, tests, benchmarks) opens no port.
    """
    if not gateway.settings.web.enabled or not web_channels(gateway):
        return None
    server = WebServer(gateway)
    await server.start()
    return server
