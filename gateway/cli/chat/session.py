"""The two ways ``switchboard chat`` reaches a gateway, behind one small interface.

:class:`RemoteSession` attaches to a running gateway (``switchboard run``, or another
``switchboard chat``) through its local socket (see :mod:`channels.terminal.server`);
:class:`LocalSession` runs a gateway in this process when none runs. Either way a message
is journaled before :meth:`submit` returns, answered once, and a question left unanswered
(Ctrl-C, a crash) is answered the next time a chat window opens.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol

from pydantic import ValidationError

from channels.terminal import NAME, TerminalChannel, Viewer, socket_path
from channels.terminal.frames import (
    Accepted,
    Ack,
    Error,
    Hello,
    Idle,
    Message,
    Submit,
    WaitIdle,
    to_window,
)
from channels.terminal.server import LINE_LIMIT
from gateway.cli.stopping import Interrupts, stop_gateway
from gateway.config.settings import Settings
from gateway.core.errors import SwitchboardError
from gateway.core.messages import new_id
from gateway.core.system.local_socket import reachable

if TYPE_CHECKING:
    from gateway.runtime.app import Gateway


class ChatError(SwitchboardError):
    """The gateway refused a message, or went away; the text says what became of it."""


def readable(text: str) -> str:
    """What was typed, as text: bytes a terminal passed on that are not UTF-8 (Python keeps
    them as lone surrogates, which no journal can store) become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class GatewayGone(ChatError):
    """The connection to the gateway ended (it stopped, or the chat that ran it closed)."""


class Window(Viewer, Protocol):
    """A view the sessions feed: also records which messages it sent."""

    @property
    def mine(self) -> _Ids: ...


class _Ids(Protocol):
    ids: set[str]


class LocalSession:
    """A gateway in this process with the terminal channel only (no gateway was running).

    It also listens on the local socket, so a second ``switchboard chat`` attaches to it."""

    attached = False

    def __init__(self, settings: Settings, window: Window) -> None:
        self._window = window
        self.channel = TerminalChannel(
            agent_name=settings.agent.name,
            model=settings.llm.model,
            socket=socket_path(settings.data_dir),
            host="chat",  # a window attached to it carries on once this one closes
        )
        self.channel.attach(window)
        from gateway.runtime.app import Gateway  # noqa: PLC0415 - an attached chat needs none

        # the terminal only: webhooks and the API are served by `switchboard run`
        self.gateway: Gateway = Gateway(settings, channels=[self.channel], serve_programs=False)

    async def start(self) -> None:
        await self.gateway.start()

    async def submit(self, text: str, message_id: str | None = None) -> None:
        """Journal ``text`` (under ``message_id``: sent again, it is the same message)."""
        message_id = message_id or new_id()
        self._window.mine.ids.add(message_id)
        await self.channel.submit(readable(text), message_id=message_id)

    async def wait_idle(self) -> None:
        await self.gateway.wait_idle(NAME)

    async def lost(self) -> NoReturn:
        """Never returns: the gateway in this process runs until the chat closes it."""
        forever: asyncio.Future[NoReturn] = asyncio.get_running_loop().create_future()
        await forever

    async def close(self, interrupts: Interrupts) -> None:
        await stop_gateway(self.gateway, interrupts)


class RemoteSession:
    """A window attached to a running gateway over its local socket."""

    attached = True

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        hello: Hello,
        window: Window,
    ) -> None:
        self.hello = hello
        self._reader = reader
        self._writer = writer
        self._window = window
        self._submits: dict[str, asyncio.Future[None]] = {}
        self._idles: list[asyncio.Future[None]] = []
        self._pump: asyncio.Task[None] | None = None
        self.gone: str | None = None  # why the connection ended
        self._saved = 0  # messages of this window the gateway journaled
        self._ended = asyncio.Event()

    @classmethod
    async def connect(cls, path: Path, window: Window) -> RemoteSession | None:
        """Attach to the gateway serving ``path``; None when none does."""
        try:
            with reachable(path) as name:
                reader, writer = await asyncio.open_unix_connection(name, limit=LINE_LIMIT)
        except (FileNotFoundError, ConnectionRefusedError):
            return None  # no socket, or one left by a gateway that crashed
        except PermissionError as exc:
            raise ChatError(
                f"cannot attach to the running gateway at {path}: {exc.strerror}; "
                "run `switchboard chat` as the user that runs the gateway"
            ) from None
        first = await reader.readline()
        try:
            hello = to_window.validate_json(first) if first else None
        except ValidationError:
            hello = None
        if not isinstance(hello, Hello):
            writer.close()
            reason = hello.message if isinstance(hello, Error) else "no greeting"
            raise ChatError(f"the gateway at {path} refused this chat: {reason}")
        session = cls(reader, writer, hello, window)
        session._pump = asyncio.create_task(session._read())
        return session

    async def submit(self, text: str, message_id: str | None = None) -> None:
        """Journal ``text`` (under ``message_id``: sent again, it is the same message); raises
        :class:`GatewayGone` if the connection ends before the gateway said it has it."""
        message_id = message_id or new_id()
        self._window.mine.ids.add(message_id)
        future = asyncio.get_running_loop().create_future()
        self._submits[message_id] = future
        self._send(Submit(id=message_id, text=readable(text)))
        await future

    async def wait_idle(self) -> None:
        future = asyncio.get_running_loop().create_future()
        self._idles.append(future)
        self._send(WaitIdle())
        await future

    async def lost(self) -> NoReturn:
        """Raises :class:`GatewayGone` (saying why) once the connection to the gateway ends."""
        await self._ended.wait()
        raise GatewayGone(self.gone or "the chat was closed")

    async def close(self, interrupts: Interrupts) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    def _send(self, frame: Submit | Ack | WaitIdle) -> None:
        if self.gone is not None:
            raise GatewayGone(self.gone)
        self._writer.write(frame.line())

    async def _read(self) -> None:
        try:
            while line := await self._reader.readline():
                frame = to_window.validate_json(line)
                if isinstance(frame, Message):
                    if await self._window.deliver(frame):
                        self._send(Ack(id=frame.id))
                elif isinstance(frame, Accepted | Error):
                    self._settle(frame)
                elif isinstance(frame, Idle):
                    idle = self._idles.pop(0) if self._idles else None
                    if idle is not None and not idle.done():  # not given up on (cancelled)
                        idle.set_result(None)
                elif not isinstance(frame, Hello):
                    self._window.show(frame)
            self.gone = self._stopped()
        except (ConnectionError, ValidationError) as exc:
            self.gone = f"lost the connection to the gateway: {exc}"
        finally:
            error = GatewayGone(self.gone or "the chat was closed")
            for future in [*self._submits.values(), *self._idles]:
                if not future.done():
                    future.set_exception(error)
            self._submits.clear()
            self._idles.clear()
            self._ended.set()

    def _stopped(self) -> str:
        """Why the chat ends when the gateway closed the connection: what became of what
        this window sent (saved only once the gateway said it journaled it)."""
        if self._submits:
            return "the gateway stopped before it saved your last message: send it again"
        if self._saved:
            return (
                "the gateway stopped; what you sent is saved and is answered when it runs "
                "again (or at the next `switchboard chat`)"
            )
        return "the gateway stopped"

    def _settle(self, frame: Accepted | Error) -> None:
        future = self._submits.pop(frame.id or "", None)
        if future is None or future.done():
            return
        if isinstance(frame, Error):
            future.set_exception(ChatError(f"not sent: {frame.message}"))
        else:
            self._saved += 1
            future.set_result(None)
