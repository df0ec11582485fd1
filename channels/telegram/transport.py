"""The Bot API over aiohttp: python-telegram-bot's transport for what the bot sends.

python-telegram-bot speaks HTTP through a replaceable :class:`telegram.request.BaseRequest`
(it ships one over httpx). httpx's connection pool (httpcore) re-examines every pooled
connection on each request, twice, and asks the socket layer whether each idle one was
closed by the server (a ``poll`` and a ``getpeername`` through anyio each time): in a
profile of 50 chats answered at once that bookkeeping, with httpx's request and response
models, was the largest single share of the gateway's CPU (docs/performance.md). aiohttp,
already the transport of the model SDKs here, hands out a free connection without scanning
the pool and parses responses in C.

Errors map as python-telegram-bot's own transport maps them: a timeout is ``TimedOut``, any
other failure to talk to the server ``NetworkError``; what the Bot API answered (an HTTP
status, a JSON error) is judged by ``BaseRequest`` as before. Proxies come from the
environment (``HTTPS_PROXY``, ``NO_PROXY``), as with httpx, read once per host: aiohttp's
own ``trust_env`` looks them (and ``~/.netrc``) up again on a worker thread for every
request, two thread hand-offs that cost more CPU than the request itself.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from typing import Any

import aiohttp
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData


class AiohttpRequest(BaseRequest):
    """One aiohttp session with at most ``connections`` connections to the Bot API."""

    def __init__(
        self,
        *,
        connections: int,
        read_timeout: float = 5.0,
        write_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        pool_timeout: float = 1.0,
        media_write_timeout: float = 20.0,
    ) -> None:
        self._connections = connections
        self._read = read_timeout
        self._write = write_timeout
        self._connect = connect_timeout
        self._pool = pool_timeout
        self._media_write = media_write_timeout
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}  # (scheme, host) -> proxy
        self._shut = False  # after shutdown() only initialize() opens it again

    @property
    def read_timeout(self) -> float:
        return self._read

    async def initialize(self) -> None:
        self._shut = False
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        self._shut = True
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(  # noqa: PLR0917 - python-telegram-bot calls it so
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._session is None and not self._shut:  # a send before the channel connected
            await self.initialize()
        session = self._session
        if session is None or session.closed:  # the channel is stopping: its outbox retries
            raise NetworkError("the connection to the Bot API is shut down")
        files = request_data.multipart_data if request_data else None
        fields = request_data.json_parameters if request_data else None
        read = _given(read_timeout, self._read)
        write = _given(write_timeout, self._media_write if files else self._write)
        connect = _given(connect_timeout, self._connect)
        pool = _given(pool_timeout, self._pool)
        timeout = aiohttp.ClientTimeout(
            # aiohttp has no write timeout: the whole exchange gets the sum of the phases
            total=_sum(connect, pool, write, read),
            connect=_sum(pool, connect),  # waiting for a free connection, then connecting
            sock_connect=connect,
            sock_read=read,
        )
        body: aiohttp.FormData | dict[str, str] | None = fields
        if files:
            form = aiohttp.FormData()
            for name, value in (fields or {}).items():
                form.add_field(name, value)
            for name, (filename, content, mime) in files.items():
                form.add_field(name, content, filename=filename, content_type=mime)
            body = form
        try:
            async with session.request(
                method, url, data=body, timeout=timeout, proxy=self._proxy_for(url)
            ) as response:
                return response.status, await response.read()
        except TimeoutError as exc:  # aiohttp's own timeouts are these too
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc

    def _proxy_for(self, url: str) -> str | None:
        """The proxy the environment names for ``url``'s host (``None``: go direct)."""
        parts = urllib.parse.urlsplit(url)
        key = (parts.scheme, parts.hostname or "")
        if key not in self._proxies:
            bypass = urllib.request.proxy_bypass(key[1])  # NO_PROXY
            found = None if bypass else urllib.request.getproxies_environment().get(key[0])
            self._proxies[key] = found
        return self._proxies[key]


def _given(value: Any, default: float) -> float | None:
    """A timeout passed to one call (``None``: none), else the transport's own."""
    return default if isinstance(value, type(BaseRequest.DEFAULT_NONE)) else value


def _sum(*parts: float | None) -> float | None:
    """The parts' total; no limit when any part has none."""
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
