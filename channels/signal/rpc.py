"""A thin client of signal-cli's JSON-RPC daemon over HTTP (``daemon --http``), on aiohttp.

signal-cli serves ``POST /api/v1/rpc`` (one JSON-RPC request, answered with its response),
``GET /api/v1/events`` (a server-sent event stream of ``receive`` notifications, each one
envelope) and ``GET /api/v1/check`` (200 while it runs); see signal-cli-jsonrpc(5). Each
request is made once: a repeated ``send`` would deliver twice, so the outbox decides.

Errors come back typed for the outbox: signal-cli's own codes (``-1`` the request cannot
succeed, ``-3`` a network failure towards Signal, ``-4`` an untrusted safety number, ``-5``
a rate limit) and the JSON-RPC ones; no answer is :class:`Unreachable`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from gateway.core.errors import (
    ChannelError,
    ChannelPermanentError,
    ChannelRateLimited,
    ChannelTransientError,
)

USER_ERROR, IO_ERROR, UNTRUSTED_KEY, RATE_LIMIT = -1, -3, -4, -5
RATE_LIMIT_WAIT = 60.0  # seconds, when signal-cli names no wait


class RpcError(Exception):
    """signal-cli answered a request with an error."""

    def __init__(self, method: str, code: int, message: str, data: Any) -> None:
        super().__init__(f"{method}: {message} ({code})")
        self.method = method
        self.code = code
        self.message = message
        self.data = data

    def channel_error(self) -> ChannelError:
        """The outbox's error for it."""
        text = f"signal-cli: {self}"
        if self.code == RATE_LIMIT:
            return ChannelRateLimited(_retry_after(self.data), "Signal rate limit")
        if self.code == UNTRUSTED_KEY:
            return ChannelPermanentError(
                f"{text}: the recipient's safety number changed; check it and run "
                "`signal-cli -a ACCOUNT trust NUMBER` to send again"
            )
        if self.code == IO_ERROR:
            return ChannelTransientError(text)
        return ChannelPermanentError(text)


class Unreachable(Exception):
    """signal-cli did not answer (not running, refused, timed out); ``sent``: the request
    may have reached it before the connection failed."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: its id (for ``Last-Event-ID``; None when signal-cli gives
    none) and the ``receive`` notification's params."""

    id: str | None
    params: dict[str, Any]


class SignalRpc:
    def __init__(self, base_url: str, account: str, *, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.account = account
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=10)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request; returns its ``result``. Raises :class:`RpcError`, :class:`Unreachable`."""
        body = {
            "jsonrpc": "2.0",
            "method": method,
            "params": {**(params or {}), "account": self.account},
            "id": uuid.uuid4().hex,
        }
        sent = False
        try:
            async with self._http().post(
                f"{self.base_url}/api/v1/rpc", json=body, timeout=self._timeout
            ) as response:
                sent = True
                if response.status == 201:  # answered without a result
                    return None
                if response.status >= 400:
                    raise Unreachable(f"HTTP {response.status} from {self.base_url}", sent=True)
                answer = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise Unreachable(
                f"cannot reach signal-cli at {self.base_url} ({exc or type(exc).__name__})",
                sent=sent or isinstance(exc, TimeoutError | aiohttp.ServerDisconnectedError),
            ) from exc
        if not isinstance(answer, dict):
            raise Unreachable(f"not a JSON-RPC answer from {self.base_url}", sent=True)
        error = answer.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            raise RpcError(
                method,
                code if isinstance(code, int) else 0,
                str(error.get("message") or "error"),
                error.get("data"),
            )
        return answer.get("result")

    async def check(self) -> None:
        """``GET /api/v1/check``: whether the daemon runs. Raises :class:`Unreachable`."""
        try:
            async with self._http().get(
                f"{self.base_url}/api/v1/check", timeout=self._timeout
            ) as response:
                if response.status != 200:
                    raise Unreachable(
                        f"{self.base_url}/api/v1/check answered HTTP {response.status}: is this "
                        "signal-cli's `daemon --http` endpoint?",
                        sent=False,
                    )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unreachable(
                f"cannot reach signal-cli at {self.base_url} ({exc or type(exc).__name__})",
                sent=False,
            ) from exc

    async def events(
        self, last_event_id: str | None, *, on_open: Callable[[], None]
    ) -> AsyncIterator[Event]:
        """The daemon's event stream from after ``last_event_id`` (signal-cli keeps recent
        events for a reconnecting client); ``on_open`` once it answered. Ends when the
        connection does."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_read=60)
        async with self._http().get(
            f"{self.base_url}/api/v1/events",
            params={"account": self.account},
            headers=headers,
            timeout=timeout,
        ) as response:
            if response.status != 200:
                raise Unreachable(f"events: HTTP {response.status}", sent=False)
            on_open()
            event_id: str | None = None
            kind = "message"
            data: list[str] = []
            async for raw in response.content:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line:
                    field, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if field == "id":
                        event_id = value
                    elif field == "event":
                        kind = value
                    elif field == "data":
                        data.append(value)
                    continue  # a comment (":" keep-alive) or a field: the event goes on
                if data and kind == "receive":
                    params = _params("\n".join(data))
                    if params is not None:
                        yield Event(event_id, params)
                event_id, kind, data = None, "message", []


def _params(data: str) -> dict[str, Any] | None:
    """An event's data: the notification's params (what signal-cli writes per event)."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("params"), dict):
        return dict(value["params"])  # a whole JSON-RPC notification
    return value if isinstance(value, dict) else None


def _retry_after(data: Any) -> float:
    """The longest wait signal-cli reports for a rate-limited send's recipients."""
    response = data.get("response") if isinstance(data, dict) else None
    results = response.get("results") if isinstance(response, dict) else None
    waits = [
        float(r["retryAfterSeconds"])
        for r in results or ()
        if isinstance(r, dict) and isinstance(r.get("retryAfterSeconds"), int | float)
    ]
    return max(waits, default=RATE_LIMIT_WAIT)
