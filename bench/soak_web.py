"""The soak's web chat user (bench/soak.py ``--web``): the owner's browser kept open on the
web chat while the Telegram users write, so a long run also shows what an open page costs.

The user signs in with a one-time link as ``switchboard run`` prints it, keeps the chat's
socket open (opened again after a gateway restart), posts a message, waits for its answer
and writes again after a pause. It judges by the assistant entries it has seen (each entry
once, by id, also when a reconnect's snapshot repeats them): every message answered once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from bench.soak_chats import ANSWER_TIMEOUT, Verdict
from gateway.web.access.security import KEY_HEADER

_ECHO = re.compile(r"echo: web-(\d+) ")


class WebUser:
    """One browser on the web chat of whichever gateway ``url`` gives at the moment."""

    def __init__(self, url: Callable[[], tuple[str, str] | None], stop: asyncio.Event) -> None:
        self._url = url  # (page URL, one-time sign-in link), None while the gateway restarts
        self._stop = stop
        self.posted: list[int] = []  # the messages the server took (a 2xx answer)
        self._entries: dict[str, dict[str, Any]] = {}  # assistant entries seen, by id
        self._changed = asyncio.Event()
        self.waits: list[float] = []  # seconds from a post to its answer showing
        self._echoes: Counter[int] = Counter()  # message number -> assistant entries echoing it
        self._others = 0  # assistant entries that echo nothing: notices (a model error)
        self._noticed: set[int] = set()  # messages answered by a notice instead of an echo

    def _done(self, n: int, others_before: int) -> bool:
        return n in self._echoes or self._others > others_before

    def verdict(self) -> Verdict:
        answers = self._echoes
        verdict = Verdict()
        for n in self.posted:
            count = answers.get(n, 0) or (n in self._noticed)
            verdict.answered += count >= 1
            verdict.lost += count == 0
            verdict.doubled += count > 1
        verdict.notices = [
            str(e.get("text", ""))[:80]
            for e in self._entries.values()
            if not _ECHO.match(str(e.get("text", "")))
        ]
        return verdict

    def _seen(self, event: dict[str, Any]) -> None:
        if event["type"] not in ("hello", "message"):
            return  # streamed deltas, typing: the answer counts once it is an entry
        entries = event.get("entries", []) if event["type"] == "hello" else [event.get("entry")]
        for entry in entries:
            if not entry or entry.get("role") != "assistant" or entry.get("kind") == "stopped":
                continue
            if str(entry["id"]) not in self._entries:
                self._entries[str(entry["id"])] = entry
                echo = _ECHO.match(str(entry.get("text", "")))
                if echo:
                    self._echoes[int(echo.group(1))] += 1
                else:
                    self._others += 1
        self._changed.set()

    async def last_look(self) -> None:
        """Read the chat once more as a page opened now shows it (answers published while
        the socket was down are in its snapshot)."""
        where = self._url()
        if where is None:
            return
        async with _signed_in(*where) as (_http, ws):
            self._seen(await ws.receive_json())

    async def run(self) -> None:
        """Write until the soak stops; a dropped socket (a restart) is opened again."""
        counter = itertools.count()
        while not self._stop.is_set():
            where = self._url()
            if where is None:
                await asyncio.sleep(0.5)
                continue
            try:
                await self._session(*where, counter)
            except (aiohttp.ClientError, ConnectionError, TimeoutError):
                await asyncio.sleep(0.5)  # the gateway restarting: sign in again

    async def _session(self, url: str, link: str, counter: itertools.count[int]) -> None:
        async with _signed_in(url, link) as (http, ws):
            reading = asyncio.create_task(self._read(ws))
            try:
                await self._write(http, url, url.rstrip("/"), counter, reading)
            finally:
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                    await reading

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async for message in ws:
                if message.type is aiohttp.WSMsgType.TEXT:
                    self._seen(message.json())
        finally:
            self._changed.set()  # a writer waiting for an answer looks again, then reconnects

    async def _write(
        self,
        http: aiohttp.ClientSession,
        url: str,
        origin: str,
        counter: itertools.count[int],
        reading: asyncio.Task[None],
    ) -> None:
        while not self._stop.is_set() and not reading.done():
            n = next(counter)
            form = aiohttp.FormData(default_to_multipart=True)
            form.add_field("id", f"soak-web-{n:08d}")
            form.add_field("text", f"web-{n} hello from the browser")
            posted, others = time.monotonic(), self._others
            async with http.post(
                url + "api/chat/messages", data=form, headers={"Origin": origin}
            ) as response:
                response.raise_for_status()
            self.posted.append(n)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(ANSWER_TIMEOUT):
                    while not self._done(n, others) and not reading.done():
                        self._changed.clear()
                        await self._changed.wait()
            if self._others > others and n not in self._echoes:
                self._noticed.add(n)  # one message at a time: a new notice is this one's
            if self._done(n, others):
                self.waits.append(time.monotonic() - posted)
            await asyncio.sleep(random.uniform(2.0, 6.0))


@contextlib.asynccontextmanager
async def _signed_in(
    url: str, link: str
) -> AsyncIterator[tuple[aiohttp.ClientSession, aiohttp.ClientWebSocketResponse]]:
    """A browser signed in with the one-time ``link``, its chat socket open; its requests
    send the page key the sign-in handed the page, as the pages do."""
    jar = aiohttp.CookieJar(unsafe=True)  # keep cookies for 127.0.0.1
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.get(link, allow_redirects=False) as response:
            response.raise_for_status()
            key = re.search(r'data-key="([^"]+)"', await response.text())
        if key is None:
            raise aiohttp.ClientError("the sign-in handed the page no key")
        http.headers[KEY_HEADER] = key[1]
        async with http.ws_connect(url + "api/chat/socket", origin=url.rstrip("/")) as ws:
            yield http, ws
