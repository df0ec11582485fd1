"""The gateway's HTTP side: web chat page, status page, ``/healthz`` and ``/metrics``.

:class:`WebServer` is started by :class:`gateway.runtime.app.Gateway` when it has a channel that
serves web routes (see :mod:`gateway.web.server`); security lives in
:mod:`gateway.web.security`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.core.webhost import ServesWeb
    from gateway.web.server import WebServer
    from gateway.web.view import GatewayView

__all__ = ["ServesWeb", "WebServer", "start_web"]


def __getattr__(name: str) -> Any:
    """The server and aiohttp load on first use: the runtime imports ``gateway.web.view``
    (plain types) at start, and a gateway that serves no pages never needs them."""
    if name == "WebServer":
        from gateway.web.server import WebServer  # noqa: PLC0415

        return WebServer
    if name == "ServesWeb":
        from gateway.core.webhost import ServesWeb  # noqa: PLC0415

        return ServesWeb
    raise AttributeError(name)


async def start_web(gateway: GatewayView) -> WebServer | None:
    """Start the web server if the gateway has a channel that serves web pages.

    ``switchboard run`` adds the web chat when ``web.enabled``; a Gateway built without it
    (``switchboard chat``, tests, benchmarks) opens no port unless webhooks or the API are
    configured (docs/connect.md).
    """
    from gateway.web.server import WebServer, program_channels, web_channels  # noqa: PLC0415

    if not gateway.settings.web.enabled:
        return None
    if not web_channels(gateway) and not program_channels(gateway):
        return None
    server = WebServer(gateway)
    await server.start()
    return server
