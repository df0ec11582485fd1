"""Wake-ups between the nodes of a cluster: PostgreSQL ``LISTEN`` on a connection of its own.

The store's writes announce themselves with ``NOTIFY`` in their own transaction
(:func:`gateway.store.engine.sql.notify`: a journaled message, a queued reply, a decided approval),
so a notification arrives only once the row is visible. :class:`Listener` hands each one to
the callback of its topic. Notifications are a shortcut, not the truth: one sent while this
connection was down is lost, so after every (re)connection each callback is called once with
an empty payload ("look again"), and the nodes also look on a slow timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg import sql

from gateway.core.lifecycle import Service
from gateway.store.engine.postgres import CONNECT_TIMEOUT

log = logging.getLogger(__name__)

RECONNECT_DELAY = 1.0


class Listener(Service):
    def __init__(
        self, url: str, topics: Mapping[str, Callable[[str], None]], *, name: str = ""
    ) -> None:
        self._url = url
        self._topics = dict(topics)
        self._name = name
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="cluster-listener")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                await self._listen()
            except (psycopg.Error, OSError) as exc:
                log.warning("cluster listener: %s; connecting again", str(exc).strip())
            self.connected.clear()
            await asyncio.sleep(RECONNECT_DELAY)

    async def _listen(self) -> None:
        conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
            self._url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT,
            application_name=f"switchboard listener {self._name}"[:63],
        )
        async with conn:
            for topic in self._topics:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(topic)))
            self.connected.set()
            for look in self._topics.values():  # whatever was missed meanwhile
                look("")
            async for note in conn.notifies():
                handle = self._topics.get(note.channel)
                if handle is None:
                    continue
                try:
                    handle(note.payload)
                except Exception:  # a callback's bug must not end the wake-ups
                    log.exception("cluster listener: handling %s failed", note.channel)
