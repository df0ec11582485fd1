"""One MCP server's connection: started on first use, shared by every turn, restarted with
backoff when it dies, stopped with the gateway.

A supervisor task owns the connection (the SDK's transports must be entered and left in
one task): it connects, initializes, lists the tools, then waits until the gateway stops or
the connection ends. Turns call tools from their own tasks through the shared session. A
server that is down answers every call with :class:`ServerDown` at once; the supervisor
keeps trying in the background (1 s, 2 s, 5 s, ... up to 5 minutes apart).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession
from mcp.client._transport import ReadStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from agent.mcp.spec import ServerSpec
from agent.mcp.transports import TransportFactory
from gateway import __version__

log = logging.getLogger(__name__)

BACKOFF = (1.0, 2.0, 5.0, 15.0, 60.0, 300.0)
HEALTHY_AFTER = 60.0  # a connection that lived this long resets the backoff
PING_TIMEOUT = 5.0
CLIENT_INFO = types.Implementation(name="switchboard", version=__version__)


class ServerState(enum.StrEnum):
    IDLE = "idle"  # not started yet (servers start on first use)
    STARTING = "starting"
    READY = "ready"
    DOWN = "down"  # the last start failed or the connection ended; retrying after a pause
    STOPPED = "stopped"


class ServerDown(Exception):
    """The server cannot take calls now; the message says why and what happens next."""


class CallTimedOut(Exception):
    """The server did not answer a call in time (it keeps running)."""


class CallRefused(Exception):
    """The server answered the call with a protocol error (its message is outside content)."""


@dataclass(slots=True)
class _Live:
    session: ClientSession
    broken: anyio.Event


class McpClient:
    def __init__(
        self,
        spec: ServerSpec,
        transport: TransportFactory,
        *,
        start_timeout: float = 30.0,
        quiet: bool = False,
    ) -> None:
        self.spec = spec
        self._transport = transport
        self._start_timeout = start_timeout
        self._log_level = logging.DEBUG if quiet else logging.WARNING  # quiet: one-off checks
        self.state = ServerState.IDLE
        self.error = ""  # why the last start failed or the connection ended
        self.tools: tuple[types.Tool, ...] = ()  # as last listed (kept while down)
        self.generation = 0  # counts successful connections; tools are re-read on each
        self.restarts = 0
        self.instructions = ""
        self.retry_at = 0.0  # monotonic time of the next attempt while down
        self._live: _Live | None = None
        self._changed = asyncio.Condition()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def start(self) -> None:
        """Start connecting in the background (idempotent)."""
        if self._task is None and self.state is not ServerState.STOPPED:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def ready(self) -> tuple[types.Tool, ...]:
        """The server's tools once it is connected (started now if it was idle). Raises
        :class:`ServerDown` at once while it waits for its next attempt."""
        await self._connection()
        return self.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        live = await self._connection()
        try:
            result = await live.session.call_tool(
                tool, arguments, read_timeout_seconds=self.spec.timeout
            )
        except MCPError as exc:
            if exc.error.code == types.REQUEST_TIMEOUT:
                raise CallTimedOut(
                    f"the {self.name} server did not answer within {self.spec.timeout:g} s"
                ) from None
            if exc.error.code != types.CONNECTION_CLOSED and await _alive(live.session):
                raise CallRefused(exc.error.message) from None
            live.broken.set()
            raise ServerDown(
                f"the {self.name} server stopped during the call ({exc.error.message}); "
                "it is being restarted, so the call may be tried again shortly"
            ) from None
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            live.broken.set()
            raise ServerDown(f"lost the connection to the {self.name} server ({exc})") from None
        except Exception as exc:  # an answer the SDK could not use (malformed, unexpected kind)
            raise CallRefused(f"the server's answer could not be used: {describe(exc)}") from None
        if not isinstance(result, types.CallToolResult):
            raise CallRefused(f"unexpected answer of type {type(result).__name__}")
        return result

    async def wait_for_state(self, *states: ServerState, restarts: int = 0) -> None:
        """Return once the server is in one of ``states`` after at least ``restarts``
        restarts (bound it with a timeout)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.state in states and self.restarts >= restarts)

    async def stop(self) -> None:
        """Close the connection (a stdio server gets its stdin closed, then SIGTERM, then
        SIGKILL, a few seconds each at most); a start in progress is abandoned."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            if self.state is ServerState.STARTING:
                task.cancel()
            try:
                async with asyncio.timeout(15):
                    await task
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # we are being cancelled ourselves, not just the start we cancelled
        await self._set(ServerState.STOPPED)

    # -- the supervisor -------------------------------------------------------------------

    async def _connection(self) -> _Live:
        if self._live is not None:
            return self._live
        if self.state is ServerState.STOPPED:
            raise ServerDown(f"the {self.name} server is stopped")
        if self.state is ServerState.DOWN:
            wait = max(0.0, self.retry_at - time.monotonic())
            raise ServerDown(
                f"the {self.name} server is down ({self.error}); next attempt in {wait:.0f} s"
            )
        self.start()
        async with self._changed:
            await self._changed.wait_for(
                lambda: self.state not in (ServerState.IDLE, ServerState.STARTING)
            )
        live = self._current()  # (the supervisor changed it while we waited)
        if live is None:
            raise ServerDown(f"the {self.name} server could not be started: {self.error}")
        return live

    def _current(self) -> _Live | None:
        return self._live

    async def _supervise(self) -> None:
        failures = 0
        while not self._stop.is_set():
            await self._set(ServerState.STARTING)
            began = time.monotonic()
            try:
                await self._connect_once()
                self.error = self.error or "the connection ended"
            except Exception as exc:
                self.error = describe(exc)
            if self._stop.is_set():
                break
            said = await asyncio.to_thread(self._transport.last_words, self.spec)
            if said:
                self.error = f"{self.error}; it said: {said}"
            failures = 0 if time.monotonic() - began > HEALTHY_AFTER else failures + 1
            delay = BACKOFF[min(failures, len(BACKOFF)) - 1] if failures else BACKOFF[0]
            self.retry_at = time.monotonic() + delay
            log.log(
                self._log_level,
                "MCP server %s is down (%s); retrying in %.0f s",
                self.name,
                self.error,
                delay,
            )
            await self._set(ServerState.DOWN)
            with anyio.move_on_after(delay):
                await self._stop.wait()
            self.restarts += 1
        self._live = None

    async def _connect_once(self) -> None:
        self.error = ""
        with anyio.CancelScope() as scope:
            scope.deadline = anyio.current_time() + self._start_timeout
            async with self._transport(self.spec) as (read, write), anyio.create_task_group() as tg:
                send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                closed = anyio.Event()
                tg.start_soon(_forward, read, send, closed)
                async with ClientSession(receive, write, client_info=CLIENT_INFO) as session:
                    try:
                        initialized = await session.initialize()
                        tools = await _list_tools(session)
                    except MCPError:
                        if closed.is_set():
                            raise ServerDown("the server exited before it answered") from None
                        raise
                    scope.deadline = math.inf
                    live = _Live(session, anyio.Event())
                    self.instructions = initialized.instructions or ""
                    self.tools, self.generation = tools, self.generation + 1
                    self._live = live
                    log.info("MCP server %s ready with %d tool(s)", self.name, len(tools))
                    await self._set(ServerState.READY)
                    try:
                        await _first_of(self._stop, closed, live.broken)
                    finally:
                        self._live = None
                    if closed.is_set():
                        self.error = "the server closed the connection"
                    elif live.broken.is_set():
                        self.error = "the server stopped answering"
                tg.cancel_scope.cancel()
        if scope.cancelled_caught:
            raise TimeoutError(f"no answer within {self._start_timeout:g} s")

    async def _set(self, state: ServerState) -> None:
        self.state = state
        async with self._changed:
            self._changed.notify_all()


async def _forward(
    source: ReadStream[SessionMessage | Exception],
    target: MemoryObjectSendStream[SessionMessage | Exception],
    closed: anyio.Event,
) -> None:
    """Pass messages to the session and notice when the transport ends (the server exited)."""
    async with target:
        try:
            async for message in source:
                await target.send(message)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
    closed.set()


async def _first_of(*events: anyio.Event | asyncio.Event) -> None:
    async with anyio.create_task_group() as group:

        async def wait(event: anyio.Event | asyncio.Event) -> None:
            await event.wait()
            group.cancel_scope.cancel()

        for event in events:
            group.start_soon(wait, event)


async def _list_tools(session: ClientSession) -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(50):  # pages; a server that pages forever gets cut off
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(tools)


async def _alive(session: ClientSession) -> bool:
    try:
        with anyio.fail_after(PING_TIMEOUT):
            await session.send_ping()
    except Exception:
        return False
    return True


def describe(exc: BaseException) -> str:
    """A one-line reason, the innermost useful error of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.error.message
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return f"program not found: {exc.filename or text}"
    if isinstance(exc, ServerDown | TimeoutError):
        return text
    return text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"
