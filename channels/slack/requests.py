"""What the HTTP Events API server refuses before bolt sees it.

bolt checks a request's signature with slack_sdk, which raises instead of answering no for
a few malformed requests anyone can send: a timestamp that is not a number (``int()``), a
signature with characters outside ASCII (``hmac.compare_digest`` on text), a body that is
not UTF-8 or names a charset that does not exist (aiohttp's ``request.text()``). Each was a
500 with bolt's error in the log, for a request without any credential. They are refused
here as bolt refuses a wrong signature: ``401 {"error": "invalid request"}``, unlogged.
"""

from __future__ import annotations

import codecs
from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

TIMESTAMP = "X-Slack-Request-Timestamp"
SIGNATURE = "X-Slack-Signature"


@web.middleware
async def well_formed(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method != "POST":
        return await handler(request)
    timestamp = request.headers.get(TIMESTAMP)
    signature = request.headers.get(SIGNATURE)
    readable = timestamp is None or (timestamp.isascii() and timestamp.strip().isdigit())
    readable = readable and (signature is None or signature.isascii())
    if readable:
        body = await request.read()  # kept for bolt; at most the app's client_max_size
        readable = _utf8(request.charset) and _decodes(body)
    if not readable:
        return web.json_response({"error": "invalid request"}, status=401)
    return await handler(request)


def _utf8(charset: str | None) -> bool:
    try:
        return charset is None or codecs.lookup(charset).name == "utf-8"
    except LookupError:
        return False


def _decodes(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
