"""A fake of Meta's WhatsApp Cloud API (the Graph API) on 127.0.0.1, and Meta's side of the
webhook: bodies built as Meta builds them, POSTed to the gateway with a real
``X-Hub-Signature-256`` (:func:`post_signed`).

The Graph API part records every call; ``/<phone number id>/messages`` answers with a new
``wamid`` or with the next scripted error (:meth:`FakeGraph.fail_next`, Meta's error body
with its numeric code); media uploads get ids; inbound media are served from
``/media/<id>`` to a bearer of the token only. The app's webhook subscription and the token's
debug info are what ``doctor`` reads, and can be changed by a test.

With :attr:`FakeGraph.webhook_url` set, it reports each message it made as Meta does: a
signed ``sent`` status POSTed to the webhook, carrying the send's
``biz_opaque_callback_data``, and POSTed again until it gets a 200 (while the gateway is
down, say). A send can be held open (:meth:`FakeGraph.hold_send`, tests/fakes/holds.py).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from channels.whatsapp.webhook import SIGNATURE_HEADER, signature
from tests.fakes.holds import Hold, Holds

TOKEN = "EAAGtest-access-token-0001"
PHONE_NUMBER_ID = "109876543210"
DISPLAY_NUMBER = "+1 555-0100"
APP_ID = "4242"
APP_SECRET = "test-app-secret-0001"
VERIFY_TOKEN = "verify-me-0001"
WABA = "777000111"
BUSINESS = "15550100"  # our own number as it appears in message context


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any]
    query: dict[str, str]
    at: float


class FakeGraph:
    def __init__(self) -> None:
        self.port = 0
        self.calls: list[Call] = []
        self.media: dict[str, tuple[bytes, str]] = {}
        self.uploads: dict[str, bytes] = {}
        self._errors: deque[tuple[int, int, str, bool]] = deque()
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.subscription: dict[str, Any] | None = {
            "object": "whatsapp_business_account",
            "callback_url": "https://bot.example.test/whatsapp/webhook",
            "active": True,
            "fields": [{"name": "messages", "version": "v23.0"}],
        }
        self.subscribed_apps = [APP_ID]
        self.webhook_url: str | None = None  # where Meta's status reports go
        self.report_retry = 0.1  # seconds between attempts to post a report
        self.reports_open = asyncio.Event()  # cleared: reports wait (Meta is late)
        self.reports_open.set()
        self.made: list[dict[str, Any]] = []  # messages made (what the people see)
        self.made_ids: list[str] = []  # their wamids, in the same order
        self.holds = Holds()
        self._reporting: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v23.0"

    async def start(self) -> FakeGraph:
        app = web.Application(client_max_size=50 * 1024**2)
        app.router.add_route("*", "/v23.0/{path:.+}", self._api)
        app.router.add_get("/media/{id}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self.holds.release_all()
        for task in self._reporting:
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- scripting ------------------------------------------------------------------------

    def fail_next(
        self, code: int, message: str = "fake error", *, status: int = 400, made: bool = False
    ) -> None:
        """The next send answers with Meta's error ``code``; ``made``: the message was made
        all the same (and is reported), as after a 5xx that came late."""
        self._errors.append((status, code, message, made))

    def hold_send(self, to: str, *, deliver: bool) -> Hold:
        """Hold the next send to ``to`` open: made (``deliver``) or not, answered once let go."""
        return self.holds.add(deliver=deliver, matches=lambda facts: facts.get("to") == to)

    def visible(self, to: str) -> list[str]:
        """What ``to`` sees: the texts (template variables) of the messages made to them."""
        shown = []
        for made in self.made:
            if made.get("to") != to:
                continue
            if made.get("type") == "text":
                shown.append(made["text"]["body"])
            elif made.get("type") == "template":
                [component] = made["template"]["components"]
                shown.append(component["parameters"][0]["text"])
            else:
                shown.append(f"[{made.get('type')}]")
        return shown

    def add_media(self, media_id: str, data: bytes, mime_type: str) -> None:
        self.media[media_id] = (data, mime_type)

    def sent(self) -> list[Call]:
        """Messages sent (not read receipts)."""
        return [
            c
            for c in self.calls
            if c.method == "POST" and c.path.endswith("/messages") and "to" in c.body
        ]

    def receipts(self) -> list[Call]:
        return [c for c in self.calls if c.body.get("status") == "read"]

    async def wait_sent(self, count: int, timeout: float = 10.0) -> list[Call]:
        async def enough() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.sent()) >= count)

        await asyncio.wait_for(enough(), timeout)
        return self.sent()

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(reached(), timeout)

    # -- the API --------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body: dict[str, Any] = {}
        if request.content_type == "application/json":
            body = await request.json()
        elif request.method == "POST":
            form = await request.post()
            body = {k: v if isinstance(v, str) else v.file.read() for k, v in form.items()}
        async with self._changed:
            self.calls.append(Call(request.method, path, body, dict(request.query), time.time()))
            self._changed.notify_all()
        if path.endswith("/subscriptions"):
            if token != f"{APP_ID}|{APP_SECRET}":
                return _error(400, 190, "Invalid OAuth access token - Cannot parse access token")
            return _json({"data": [self.subscription] if self.subscription else []})
        if token != TOKEN:
            return _error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        if path == PHONE_NUMBER_ID:
            return _json(
                {
                    "display_phone_number": DISPLAY_NUMBER,
                    "verified_name": "Switchboard Test",
                    "id": PHONE_NUMBER_ID,
                }
            )
        if path == f"{PHONE_NUMBER_ID}/messages":
            return await self._message(body)
        if path == f"{PHONE_NUMBER_ID}/media":
            media_id = f"up-{next(self._ids)}"
            data = body.get("file")
            self.uploads[media_id] = data if isinstance(data, bytes) else b""
            return _json({"id": media_id})
        if path == "debug_token":
            scopes = [{"scope": "whatsapp_business_messaging", "target_ids": [WABA]}]
            return _json({"data": {"app_id": APP_ID, "is_valid": True, "granular_scopes": scopes}})
        if path == f"{WABA}/subscribed_apps":
            apps = [{"whatsapp_business_api_data": {"id": a}} for a in self.subscribed_apps]
            return _json({"data": apps})
        if path in self.media:
            data, mime = self.media[path]
            url = f"http://127.0.0.1:{self.port}/media/{path}"
            return _json({"url": url, "mime_type": mime, "file_size": len(data), "id": path})
        return _error(400, 100, f"Unsupported request: {path}")

    async def _message(self, body: dict[str, Any]) -> web.Response:
        if body.get("status") == "read":
            return _json({"success": True})
        if self._errors:
            status, code, message, made = self._errors.popleft()
            if made:
                await self._make(body)
            return _error(status, code, message)
        held = self.holds.take(body)
        if held is not None:
            return await Holds.serve(
                held, lambda: self._make(body), lambda: _error(503, 2, "Service temporarily")
            )
        return await self._make(body)

    async def _make(self, body: dict[str, Any]) -> web.Response:
        wamid = f"wamid.out{next(self._ids)}"
        async with self._changed:
            self.made.append(body)
            self.made_ids.append(wamid)
            self._changed.notify_all()
        if self.webhook_url is not None:
            report = status(wamid, str(body.get("to")), "sent")
            if body.get("biz_opaque_callback_data"):
                report["biz_opaque_callback_data"] = body["biz_opaque_callback_data"]
            task = asyncio.get_running_loop().create_task(self._report(self.webhook_url, report))
            self._reporting.add(task)
            task.add_done_callback(self._reporting.discard)
        return _json(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": body.get("to"), "wa_id": body.get("to")}],
                "messages": [{"id": wamid}],
            }
        )

    async def _report(self, url: str, report: dict[str, Any]) -> None:
        """POST a status webhook until the gateway answers 200, as Meta does."""
        while True:
            await self.reports_open.wait()
            try:
                response = await post_signed(url, body(statuses=(report,)))
                if response.status == 200:
                    return
            except aiohttp.ClientError:
                pass  # the gateway is down: Meta tries again later
            await asyncio.sleep(self.report_retry)

    async def _download(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.Response(status=401)
        data, mime = self.media[request.match_info["id"]]
        return web.Response(body=data, content_type=mime)


def _json(data: dict[str, Any]) -> web.Response:
    return web.json_response(data)


def _error(status: int, code: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "x"}},
        status=status,
    )


# -- Meta's side of the webhook --------------------------------------------------------------


_wamids = itertools.count(1)


def message(
    sender: str = "4915112345678",
    *,
    kind: str = "text",
    content: dict[str, Any] | None = None,
    text: str = "hello",
    wamid: str | None = None,
    when: float | None = None,
    reply_to: str | None = None,
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "from": sender,
        "id": wamid or f"wamid.in{next(_wamids)}",
        "timestamp": str(int(when if when is not None else time.time())),
        "type": kind,
    }
    raw[kind] = content if content is not None else {"body": text}
    if reply_to:
        raw["context"] = {"from": BUSINESS, "id": reply_to}
    return raw


def body(
    *messages: dict[str, Any],
    statuses: tuple[dict[str, Any], ...] = (),
    name: str = "Dana",
    phone_number_id: str = PHONE_NUMBER_ID,
) -> dict[str, Any]:
    """A webhook body as Meta sends it, for our number."""
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": BUSINESS, "phone_number_id": phone_number_id},
    }
    if messages:
        senders = dict.fromkeys(m["from"] for m in messages)
        value["contacts"] = [{"profile": {"name": name}, "wa_id": s} for s in senders]
        value["messages"] = list(messages)
    if statuses:
        value["statuses"] = list(statuses)
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": WABA, "changes": [{"field": "messages", "value": value}]}],
    }


def status(
    wamid: str, recipient: str, state: str, *, code: int = 0, title: str = ""
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "id": wamid,
        "status": state,
        "timestamp": str(int(time.time())),
        "recipient_id": recipient,
    }
    if code:
        report["errors"] = [{"code": code, "title": title, "message": title}]
    return report


async def post_signed(
    url: str, data: dict[str, Any], *, secret: str = APP_SECRET, signed: bool = True
) -> aiohttp.ClientResponse:
    """POST ``data`` as Meta does: the raw body signed with the app secret, through a proxy
    (public Host, forwarding headers, no Origin)."""
    raw = json.dumps(data).encode()
    headers = {
        "Content-Type": "application/json",
        "Host": "bot.example.test",
        "X-Forwarded-For": "173.252.127.1",
    }
    if signed:
        headers[SIGNATURE_HEADER] = signature(secret.encode(), raw)
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=raw, headers=headers) as response,
    ):
        await response.read()
        return response
