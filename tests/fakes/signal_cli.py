"""A fake signal-cli daemon (``signal-cli -a ACCOUNT daemon --http``) on 127.0.0.1, and the
people on the other side of it. It follows signal-cli-jsonrpc(5):

* ``POST /api/v1/rpc``: one JSON-RPC 2.0 request. ``send`` (``recipient`` or ``groupId``,
  ``message``, ``textStyle``, ``attachment`` data URIs, ``quoteTimestamp``/``quoteAuthor``)
  answers ``{"timestamp": ..., "results": [...]}``, the timestamp naming the message;
  ``sendTyping``, ``sendReaction``, ``listGroups`` and ``getAttachment`` (base64 ``data``)
  as signal-cli answers them; errors with signal-cli's codes (``-1`` user error, ``-5``
  rate limit). Every request must name the daemon's ``account``.
* ``GET /api/v1/events``: server-sent events ``event:receive`` whose data is the
  notification's params (``{"account": ..., "envelope": {...}}``), each with an ``id``;
  the last 1000 are kept, and a client reconnecting with ``Last-Event-ID`` first gets the
  ones after it (an unknown id: all kept ones). Keep-alive comments in between.
* ``GET /api/v1/check``: 200.

The people (:meth:`FakeSignal.say`) write envelopes as signal-cli shows them (``source``,
``sourceNumber``, ``sourceUuid``, ``timestamp``, ``dataMessage`` with ``groupInfo``,
``mentions``, ``quote``, ``attachments``); a person whose phone is online answers every
message made to them with a delivery receipt (``receiptMessage``), as Signal apps do.
:meth:`FakeSignal.restart` is a daemon restart: the kept events are gone; a send can be
held open (tests/fakes/holds.py).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.holds import Hold, Holds

ACCOUNT = "+15550000001"


@dataclass
class Person:
    number: str
    name: str
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    online: bool = True  # their phone answers our messages with delivery receipts


@dataclass
class Made:
    """A message the daemon sent: to a person or a group, with what people see."""

    timestamp: int
    to: str  # a person's number or a group id
    params: dict[str, Any]

    @property
    def text(self) -> str:
        return str(self.params.get("message") or "")


class FakeSignal:
    def __init__(self, account: str = ACCOUNT) -> None:
        self.account = account
        self.port = 0
        self.people: dict[str, Person] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.attachments: dict[str, bytes] = {}
        self.made: list[Made] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.holds = Holds()
        self._events: deque[tuple[int, str]] = deque(maxlen=1000)
        self._ids = itertools.count(1)
        self._last_stamp = 0
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._streams: dict[web.StreamResponse, web.Request] = {}
        self.connections = 0  # event streams opened

    def _stamp(self) -> int:
        """Now, in milliseconds, as Signal timestamps are: distinct and increasing."""
        self._last_stamp = max(self._last_stamp + 1, int(time.time() * 1000))
        return self._last_stamp

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakeSignal:
        app = web.Application(client_max_size=50 * 1024**2)
        app.router.add_post("/api/v1/rpc", self._rpc)
        app.router.add_get("/api/v1/events", self._stream)
        app.router.add_get("/api/v1/check", self._check)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self.holds.release_all()
        for request in list(self._streams.values()):  # a stopped daemon's streams end at once
            if request.transport is not None:
                request.transport.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def restart(self, while_down: Callable[[], Awaitable[None]] | None = None) -> None:
        """signal-cli stopped and started again on the same port: kept events are gone.
        ``while_down`` runs in between."""
        await self.stop()
        self._events.clear()
        if while_down is not None:
            await while_down()
        await self.start()

    # -- the people -----------------------------------------------------------------------

    def person(self, number: str, name: str = "") -> Person:
        return self.people.setdefault(number, Person(number, name or number))

    def group(self, group_id: str, name: str, *members: str) -> None:
        self.groups[group_id] = {"id": group_id, "name": name, "members": list(members)}

    def envelope(
        self,
        number: str,
        text: str,
        *,
        group: str | None = None,
        mentions: list[dict[str, Any]] | None = None,
        quote: dict[str, Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """What signal-cli hands on for a message ``number`` wrote."""
        person = self.person(number)
        stamp = self._stamp()
        data: dict[str, Any] = {
            "timestamp": stamp,
            "message": text,
            "expiresInSeconds": 0,
            "viewOnce": False,
        }
        if group is not None:
            data["groupInfo"] = {
                "groupId": group,
                "groupName": self.groups.get(group, {}).get("name", ""),
                "revision": 1,
                "type": "DELIVER",
            }
        if mentions:
            data["mentions"] = mentions
        if quote:
            data["quote"] = quote
        if attachments:
            data["attachments"] = attachments
        return {
            "account": self.account,
            "envelope": {
                "source": person.number,
                "sourceNumber": person.number,
                "sourceUuid": person.uuid,
                "sourceName": person.name,
                "sourceDevice": 1,
                "timestamp": stamp,
                "serverReceivedTimestamp": stamp + 5,
                "serverDeliveredTimestamp": stamp + 9,
                "dataMessage": data,
            },
        }

    async def say(self, number: str, text: str, **extra: Any) -> dict[str, Any]:
        """``number`` writes ``text`` (to the bot, or in ``group=``); returns the notification."""
        params = self.envelope(number, text, **extra)
        await self.emit(params)
        return params

    def mention_of_bot(self, text: str) -> list[dict[str, Any]]:
        """A mention of the bot at the placeholder (U+FFFC) in ``text``."""
        start = len(text[: text.index("\ufffc")].encode("utf-16-le")) // 2
        return [{"name": self.account, "number": self.account, "uuid": "bot-uuid",
                 "start": start, "length": 1}]  # fmt: skip

    async def emit(self, params: dict[str, Any]) -> None:
        """Hand a notification to the event streams (and keep it)."""
        event_id = next(self._ids)
        data = json.dumps(params)
        self._events.append((event_id, data))
        for stream in list(self._streams):
            try:
                await stream.write(_event(event_id, data))
            except (ConnectionError, RuntimeError):
                self._streams.pop(stream, None)

    # -- what people see ------------------------------------------------------------------

    def shown(self, to: str) -> list[str]:
        return [m.text for m in self.made if m.to == to]

    async def wait_for(self, predicate: Any, timeout: float = 15.0) -> None:
        async def reached() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(reached(), timeout)

    async def deliver(self, to: str, text: str) -> Made:
        """A message the daemon sent for a client that never heard so (a lost send)."""
        made = Made(self._stamp(), to, {"message": text})
        await self._made(made)
        return made

    def hold_send(self, to: str, *, deliver: bool) -> Hold:
        return self.holds.add(deliver=deliver, matches=lambda facts: facts.get("to") == to)

    # -- the daemon -----------------------------------------------------------------------

    async def _check(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("account", self.account) != self.account:
            return web.Response(status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.connections += 1
        last = request.headers.get("Last-Event-ID")
        kept = list(self._events)
        if last is not None:
            ids = [event_id for event_id, _ in kept]
            if last.isdigit() and int(last) in ids:
                kept = kept[ids.index(int(last)) + 1 :]
            for event_id, data in kept:
                await response.write(_event(event_id, data))
        self._streams[response] = request
        async with self._changed:
            self._changed.notify_all()
        try:
            while True:
                await asyncio.sleep(1.0)
                await response.write(b":\n")
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            pass
        finally:
            self._streams.pop(response, None)
        return response

    async def _rpc(self, request: web.Request) -> web.Response:
        body = await request.json()
        method, params, call_id = body.get("method"), body.get("params") or {}, body.get("id")
        async with self._changed:
            self.calls.append((str(method), params))
            self._changed.notify_all()
        if params.get("account") != self.account:
            return _error(call_id, -32602, "Specified account does not exist")
        if method == "send":
            return await self._send(call_id, params)
        if method in ("sendTyping", "sendReaction"):
            return _result(call_id, {"timestamp": self._stamp(), "results": []})
        if method == "listGroups":
            return _result(call_id, list(self.groups.values()))
        if method == "getAttachment":
            data = self.attachments.get(str(params.get("id")))
            if data is None:
                return _error(call_id, -1, f"Could not find attachment with ID: {params.get('id')}")
            return _result(call_id, {"data": base64.b64encode(data).decode()})
        return _error(call_id, -32601, "Method not implemented")

    async def _send(self, call_id: Any, params: dict[str, Any]) -> web.Response:
        recipients = params.get("recipient") or []
        to = str(params.get("groupId") or (recipients[0] if recipients else ""))
        if to not in self.groups and to not in self.people:
            return _error(call_id, -1, f"The user {to} is not registered.")
        stamp = self._stamp()

        async def make() -> web.Response:
            await self._made(Made(stamp, to, params))
            return _result(call_id, {"timestamp": stamp, "results": [{"type": "SUCCESS"}]})

        hold = self.holds.take({"to": to})
        if hold is None:
            return await make()
        return await Holds.serve(hold, make, lambda: web.Response(status=500))

    async def _made(self, made: Made) -> None:
        async with self._changed:
            self.made.append(made)
            self._changed.notify_all()
        members = self.groups[made.to]["members"] if made.to in self.groups else [made.to]
        for number in members:
            person = self.people.get(number)
            if person is not None and person.online:
                await self.emit(self._receipt(person, made.timestamp))

    def _receipt(self, person: Person, stamp: int) -> dict[str, Any]:
        now = self._stamp()
        return {
            "account": self.account,
            "envelope": {
                "source": person.number,
                "sourceNumber": person.number,
                "sourceUuid": person.uuid,
                "sourceName": person.name,
                "sourceDevice": 1,
                "timestamp": now,
                "receiptMessage": {
                    "when": now,
                    "isDelivery": True,
                    "isRead": False,
                    "isViewed": False,
                    "timestamps": [stamp],
                },
            },
        }


def _event(event_id: int, data: str) -> bytes:
    return f"id:{event_id}\nevent:receive\ndata:{data}\n\n".encode()


def _result(call_id: Any, result: Any) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "result": result, "id": call_id})


def _error(call_id: Any, code: int, message: str) -> web.Response:
    return web.json_response(
        {"jsonrpc": "2.0", "error": {"code": code, "message": message, "data": None}, "id": call_id}
    )
