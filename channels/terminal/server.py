"""The gateway's door for ``switchboard chat``: a Unix socket in the data directory.

Why a socket and not the web API: it needs no token and no port, works with the web server
disabled and inside a container (``docker exec ... switchboard chat``), and only the
gateway's own OS user can connect: the socket is mode 0600 in the data directory, and each
connection's peer credentials (``SO_PEERCRED``) must name that user (or root). Whoever
passes can already read the database and the config, so the window acts as the owner, like
the in-process terminal chat.

One connection is one window (:class:`Window`): it submits messages (answered once they
are journaled), receives live frames and outbox messages, and acknowledges each message it
has shown; the channel counts a message delivered only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from channels.terminal.frames import (
    Accepted,
    Ack,
    Error,
    Hello,
    Idle,
    LiveFrame,
    Message,
    Submit,
    Viewer,
    WaitIdle,
    from_window,
)
from gateway.core.bus import Accepted as Outcome
from gateway.core.errors import ChannelError, StoreError
from gateway.core.system.local_socket import is_gateway_user, peer_uid, reachable

log = logging.getLogger(__name__)

LINE_LIMIT = 1 << 20  # bytes of one frame (a 100,000-character message, JSON-escaped)
WRITE_BACKLOG = 4 << 20  # bytes a window may fall behind before it is dropped


class Host(Protocol):
    """What the server needs of :class:`channels.terminal.channel.TerminalChannel`."""

    def attach(self, viewer: Viewer) -> None: ...
    def detach(self, viewer: Viewer) -> None: ...
    def hello(self, user: str) -> Hello: ...
    async def submit(
        self, text: str, *, message_id: str | None = None, user: str | None = None
    ) -> Outcome: ...


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class TerminalServer:
    def __init__(self, host: Host, path: Path, wait_idle: Callable[[], Awaitable[None]]) -> None:
        self._host = host
        self.path = path
        self._wait_idle = wait_idle
        self._server: asyncio.Server | None = None
        self._windows: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # A socket left by a crash: the gateway holds the data directory's lock, so nobody
        # else can be serving it.
        self.path.unlink(missing_ok=True)
        with reachable(self.path) as name:
            self._server = await asyncio.start_unix_server(
                self._connected, path=name, limit=LINE_LIMIT
            )
        self.path.chmod(0o600)  # peer credentials are checked too: no window in between
        log.info("terminal chats attach at %s", self.path)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        # Hang up rather than cancel: asyncio logs a cancelled connection handler as an error.
        for writer in self._windows.values():
            writer.transport.abort()
        await asyncio.gather(*self._windows, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        self.path.unlink(missing_ok=True)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._windows[task] = writer
        try:
            sock: socket.socket = writer.get_extra_info("socket")
            uid = peer_uid(sock)
            if uid is not None and not is_gateway_user(uid):
                log.warning("terminal chat refused for uid %d (not the gateway's user)", uid)
                writer.write(Error(message="only the gateway's own user may attach").line())
                return
            window = Window(self._host, reader, writer, self._wait_idle)
            await window.run(user_name(os.getuid() if uid is None else uid))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._windows.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class Window:
    """One attached ``switchboard chat``, as the channel sees it."""

    def __init__(
        self,
        host: Host,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        wait_idle: Callable[[], Awaitable[None]],
    ) -> None:
        self._host = host
        self._reader = reader
        self._writer = writer
        self._wait_idle = wait_idle
        self._acks: dict[str, asyncio.Future[bool]] = {}
        self._waits: set[asyncio.Task[None]] = set()
        self._gone = False

    async def run(self, user: str) -> None:
        self._write(self._host.hello(user))
        self._host.attach(self)
        try:
            while line := await self._reader.readline():
                try:
                    frame = from_window.validate_json(line)
                except ValidationError as exc:
                    self._write(Error(message=f"malformed frame: {exc.errors()[0]['msg']}"))
                    continue
                if isinstance(frame, Submit):
                    await self._submit(frame, user)
                elif isinstance(frame, Ack):
                    future = self._acks.get(frame.id)
                    if future is not None and not future.done():
                        future.set_result(True)
                elif isinstance(frame, WaitIdle):
                    task = asyncio.create_task(self._idle())
                    self._waits.add(task)
                    task.add_done_callback(self._waits.discard)
        finally:
            self._gone = True
            self._host.detach(self)
            for future in self._acks.values():
                if not future.done():
                    future.set_result(False)
            for task in list(self._waits):
                task.cancel()

    async def _submit(self, frame: Submit, user: str) -> None:
        try:
            outcome = await self._host.submit(frame.text, message_id=frame.id, user=user)
        except (ChannelError, StoreError) as exc:  # not journaled: the window says so
            self._write(Error(id=frame.id, message=str(exc) or type(exc).__name__))
            return
        self._write(Accepted(id=frame.id, status=outcome.value))

    async def _idle(self) -> None:
        await self._wait_idle()
        self._write(Idle())

    # -- Viewer ---------------------------------------------------------------------------

    def show(self, frame: LiveFrame) -> None:
        self._write(frame)

    async def deliver(self, message: Message) -> bool:
        if self._gone:
            return False
        future = self._acks.setdefault(message.id, asyncio.get_running_loop().create_future())
        self._write(message)
        try:
            return await future
        finally:
            self._acks.pop(message.id, None)

    def _write(self, frame: Hello | Accepted | Error | Idle | LiveFrame | Message) -> None:
        if self._gone:
            return
        transport = self._writer.transport
        if transport.is_closing() or transport.get_write_buffer_size() > WRITE_BACKLOG:
            self._gone = True  # the window stopped reading: drop it, it resyncs on return
            transport.abort()
            for future in self._acks.values():
                if not future.done():
                    future.set_result(False)
            return
        self._writer.write(frame.line())
