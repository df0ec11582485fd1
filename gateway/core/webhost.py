"""The contract between the gateway's web server and channels that serve pages on it.

A channel that implements :class:`ServesWeb` (the web chat) adds its routes to the server
of ``switchboard run``; the server's guard authenticates each request and sets the
browser's random id before a channel's handler runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from aiohttp import web

Prepare = Callable[[web.Request, web.StreamResponse], None]
BROWSER_ID = web.RequestKey("switchboard_browser_id", str)


def browser_id(request: web.Request) -> str:
    """The random id of the browser making ``request`` (set by the server's guard)."""
    return request[BROWSER_ID]


@runtime_checkable
class ServesWeb(Protocol):
    """A channel with its own HTTP endpoints on this server (the web chat)."""

    def web_routes(self, prepare: Prepare) -> Sequence[web.RouteDef]:
        """Routes to add; ``prepare`` adds security headers and cookies to a response the
        handler prepares itself (a WebSocket)."""

    async def close_web(self) -> None:
        """Close long-lived connections (sockets) before the server stops."""


@runtime_checkable
class ServesWebhooks(Protocol):
    """A channel that receives a platform's webhooks on this server (WhatsApp).

    Its paths are public: the platform sends no web token, no ``Origin``, and comes through
    the reverse proxy with its own ``Host``. So the server's guard lets these requests by,
    and every handler authenticates each request itself (a signature over the raw body)
    before it reads or stores anything.
    """

    def webhook_routes(self) -> Sequence[web.RouteDef]:
        """Routes to add, each on a path of its own (the guard exempts exactly these)."""
