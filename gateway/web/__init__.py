"""The gateway's HTTP side: the web chat, the owner's control center, ``/healthz`` and
``/metrics``.

:class:`WebServer` is started by :class:`gateway.runtime.app.Gateway` when it has a channel that
serves web routes (see :mod:`gateway.web.server`); security lives in
:mod:`gateway.web.access.security`.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.core.system.listener import Listener
    from gateway.core.webhost import ServesWeb
    from gateway.web.server import WebServer
    from gateway.web.view import GatewayView

__all__ = ["ServesWeb", "WebServer", "start_web", "web_listener"]


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


async def start_web(gateway: GatewayView, *, standby: bool = False) -> WebServer | None:
    """Start the web server if the gateway has a channel that serves web pages, takes a
    platform's webhooks (WhatsApp) or serves other programs (webhooks, the API).

    ``switchboard run`` adds the web chat when ``web.enabled``; a Gateway built without it
    (``switchboard chat``, tests, benchmarks) opens no port unless webhooks or the API are
    configured (docs/connect.md). ``standby``: a cluster node that does not lead yet serves
    only what every node receives (:class:`~gateway.web.server.WebServer`).
    """
    from gateway.web.serving import serves_something  # noqa: PLC0415

    if not gateway.settings.web.enabled or not serves_something(gateway):
        return None
    # the server and aiohttp's web side load on a thread: the channels started just
    # before go on meanwhile (Telegram's first poll is not held up by the import)
    await asyncio.to_thread(importlib.import_module, "gateway.web.server")
    from gateway.web.server import WebServer  # noqa: PLC0415

    server = WebServer(gateway, standby=standby)
    await server.start()
    return server


def web_listener(gateway: GatewayView) -> tuple[Listener, ...]:
    """The web server's address, to probe before anything starts (gateway/runtime/app.py);
    none when it will not start (:func:`start_web`) or takes any free port."""
    from gateway.web.serving import serves_something  # noqa: PLC0415

    web = gateway.settings.web
    if not web.enabled or not web.port or not serves_something(gateway):
        return ()
    return (web.listener(),)
