"""The contract between the gateway's web server and channels that serve pages on it.

A channel that implements :class:`ServesWeb` (the web chat) adds its routes to the server
of ``switchboard run``; the server's guard authenticates each request and sets the
browser's random id before a channel's handler runs.

A channel that implements :class:`ServesWebhooks` (WhatsApp) takes a platform's webhooks on
paths of its own, which the guard exempts one by one: each request is checked against the
platform's signature by the handler.

A channel that implements :class:`ServesPrograms` (webhooks, the API) serves other
programs, which authenticate every request themselves (a signature, a bearer token of their
own): the guard's browser checks (the web token or cookie, Host, Origin) do not apply under
its ``program_prefix``, and what authenticates there opens nothing anywhere else. What the
server answers there itself (no such path, a method the path does not take, a node that
does not lead, a handler that failed) is in the channel's own error format too
(:meth:`ServesPrograms.program_error`): a program parses every answer it gets.

A channel that is :class:`gateway.core.channel.ReceivesOnEveryNode` (WhatsApp, the signed
hooks) is served by every node of a cluster, the ones that do not lead too: all it receives
is signed requests that it journals in the shared database, so whichever node a load
balancer picks takes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from aiohttp import web

Prepare = Callable[[web.Request, web.StreamResponse], None]

# The subprotocol a page's WebSocket asks for, beside the one that carries its sign-in's page
# key (a page cannot give a WebSocket a header: gateway/web/access/security.py). A handler
# that opens a socket for pages accepts it (``WebSocketResponse(protocols=(...,))``): a
# browser that offered subprotocols closes a socket whose answer names none.
WEB_SOCKET_PROTOCOL = "switchboard"


@runtime_checkable
class ServesWeb(Protocol):
    """A channel with its own HTTP endpoints on this server (the web chat)."""

    def web_routes(self, prepare: Prepare) -> Sequence[web.RouteDef]:
        """Routes to add; ``prepare`` adds security headers and cookies to a response the
        handler prepares itself (a WebSocket) and ties it to the browser's session: when
        the browser is signed out, the server closes it."""

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


class CredentialThrottle(Protocol):
    """Failed credentials per client address (the web server's, shared by every route):
    a client past the limit is refused before its credential is checked."""

    def throttled(self, request: web.Request) -> bool: ...

    def record_failure(self, request: web.Request) -> None: ...


@runtime_checkable
class ServesPrograms(Protocol):
    """A channel whose endpoints other programs call; each request authenticates itself."""

    program_prefix: str  # every route's path starts with it ("/hooks/", "/v1/")

    def program_routes(self, throttle: CredentialThrottle) -> Sequence[web.RouteDef]:
        """Routes to add; each handler checks the request's own credential and reports a
        wrong one to ``throttle``."""

    def program_error(self, request: web.Request, error: web.HTTPException) -> web.Response:
        """``error`` (404: no route; 405: not this method, ``Allow`` in its headers; 503: this
        node does not lead; 500: a handler failed) as this channel's clients parse errors:
        the API's in OpenAI's shape, so an SDK raises its usual exception instead of failing
        on a plain-text body. Keep ``error``'s ``Allow`` and ``Retry-After`` headers."""

    async def close_web(self) -> None:
        """End long-lived responses (event streams) before the server stops."""
