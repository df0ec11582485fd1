"""The WhatsApp webhook on the gateway's web server: Meta's handshake, then signed POSTs.

* ``GET <webhook_path>?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`` is Meta's
  verification when the callback URL is set up: the challenge is echoed only for the right
  verify token (403 otherwise).
* Every ``POST`` must carry ``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body with
  the app secret>``; without the right one it is refused with 401 before the body is parsed
  or anything is stored. The path is exempt from the web server's own guard (no token, no
  Origin: :class:`gateway.core.webhost.ServesWebhooks`), so this check is the only gate.
* A signed POST is answered 200 only after everything in it is journaled (or, for delivery
  reports, recorded); any failure answers 500 and Meta delivers it again (for up to 7
  days), where the journal recognises what it already has. A signed body that is not
  JSON is answered 200 and dropped: sending it again would not mend it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway.core.credentials import same_secret
from gateway.core.system.bodies import parse_json

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_BODY = 1_000_000  # webhook bodies are small; files are fetched separately

Accept = Callable[[Any], Awaitable[None]]


def signature(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value Meta sends for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class Webhook:
    def __init__(self, path: str, *, app_secret: str, verify_token: str, accept: Accept) -> None:
        self.path = "/" + path.strip("/")
        self._secret = app_secret.encode()
        self._verify_token = verify_token.encode()
        self._accept = accept

    def routes(self) -> list[web.RouteDef]:
        return [web.get(self.path, self._verify), web.post(self.path, self._receive)]

    async def _verify(self, request: web.Request) -> web.Response:
        query = request.query
        given = query.get("hub.verify_token", "")
        if query.get("hub.mode") == "subscribe" and same_secret(given, self._verify_token):
            log.info("whatsapp: Meta verified the webhook at %s", self.path)
            return web.Response(text=query.get("hub.challenge", ""))
        log.warning("whatsapp: refused a webhook verification with the wrong verify token")
        return web.Response(status=403, text="forbidden")

    async def _receive(self, request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > MAX_BODY:
            return web.Response(status=413, text="too large")
        body = await request.read()
        given = request.headers.get(SIGNATURE_HEADER, "")
        if not same_secret(given, signature(self._secret, body)):
            log.warning("whatsapp: refused a webhook POST without the right signature")
            return web.Response(status=401, text="bad signature")
        try:
            data = parse_json(body)
        except ValueError as exc:
            log.warning("whatsapp: dropping a signed webhook body that is not JSON: %s", exc)
            return web.Response(text="ignored")
        try:
            await self._accept(data)
        except Exception:
            log.exception("whatsapp: webhook not accepted; Meta will deliver it again")
            return web.Response(status=500, text="not accepted, send it again")
        return web.Response(text="ok")
