"""``switchboard chat``: talk to the agent in the terminal.

With a gateway running (``switchboard run``, or another ``switchboard chat``) the chat
attaches to it through the local socket in the data directory; otherwise it runs a gateway
in this process (which others may attach to in turn). Either way it is the same
conversation: the ``terminal`` channel's chat ``local``.

At a terminal the prompt stays open while the agent works: what the user sends meanwhile
goes to the gateway at once, as from any other channel (``/stop`` stops the running turn
beside the queue; a next message joins the turn or waits behind it, as ``followups`` says).
Ctrl-C on an empty line while a turn runs sends ``/stop``; a second Ctrl-C, or Ctrl-C when
nothing runs, leaves. From a pipe the chat reads one line, waits for its answer, then the
next.

``switchboard chat -m TEXT`` sends one message, prints the answer and exits: 0, or 1 when
the answer was a failure notice. Answers to earlier questions (left unanswered, or
undelivered, when a chat closed) come first, marked "(earlier, undelivered)". With stdout
not a terminal it prints the answer's text and nothing else (notes and earlier answers go to
stderr), for scripts.

Leaving while the agent works (Ctrl-C with ``-m`` or from a pipe, the second Ctrl-C at a
terminal, Ctrl-D): an in-process gateway stops, saying what it waits for, and a further
Ctrl-C stops it at once (the turn resumes at the next start); an attached chat just leaves
(the running gateway finishes the turn; the answer shows in the next chat window).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from rich.console import Console

from channels.terminal import socket_path
from gateway.cli.chat.session import ChatError, GatewayGone, LocalSession, RemoteSession
from gateway.cli.chat.view import PlainView, RichView
from gateway.cli.stopping import Interrupts
from gateway.config.settings import Settings
from gateway.core.errors import AnotherInstanceRunning, ConfigError
from gateway.core.messages import new_id

if TYPE_CHECKING:
    from gateway.cli.chat.prompt import PromptReader

INTERRUPTED = 130
ATTEMPTS = 3  # a -m message whose gateway went away: tries the next one, or its own
STOPPING_SECONDS = 30.0  # how long it waits for a gateway that is stopping to let go
LOCK_POLL = 0.2
HINTS = "Enter sends · Alt-Enter: new line · Ctrl-C stops the answer · Ctrl-D leaves · /help"
STOPPING = "stopping the answer (Ctrl-C again leaves the chat)"
LEFT_ATTACHED = (
    "left the chat; the gateway finishes what you asked, and the answer shows the next time "
    "you open `switchboard chat`"
)

T = TypeVar("T")
View = RichView | PlainView
Session = LocalSession | RemoteSession


async def chat(
    settings: Settings, message: str | None, *, attach_only: ConfigError | None = None
) -> int:
    """The chat; ``attach_only``: the configuration is invalid (``settings`` is what is
    valid of it), so the chat attaches to a running gateway and never runs one itself,
    raising this error instead."""
    interactive = message is None
    at_terminal = sys.stdout.isatty() and (not interactive or sys.stdin.isatty())
    view: View
    terminal: tuple[RichView, PromptReader] | None = None  # the interactive chat's window
    if at_terminal:
        view = RichView(Console(highlight=False))
        if interactive:
            from gateway.cli.chat.prompt import PromptReader  # noqa: PLC0415 - not for -m

            terminal = (view, PromptReader(settings.data_dir, above=view.region))
            view.redraw = terminal[1].redraw  # the live region is drawn above the prompt
    else:
        view = PlainView(
            prefix="assistant> " if interactive else "",
            notes=sys.stdout if interactive else sys.stderr,
        )
    view.earlier = not interactive  # until -m sends its message: answers to earlier ones
    with Interrupts() as interrupts:
        remote = await RemoteSession.connect(socket_path(settings.data_dir), view)
        if interactive:
            where = "attached to the running gateway" if remote else "gateway in this process"
            view.say(
                f"Switchboard chat · {settings.agent.name} · model {settings.llm.model} ({where})"
            )
            if at_terminal:
                view.say(HINTS)
        session = _attached(remote, view) if remote else await _local(settings, view, attach_only)
        try:
            if message is not None:
                one = _OneShot(settings, session, view, interrupts, attach_only)
                try:
                    return await one.send(message)
                finally:
                    session = one.session
            if terminal is not None:
                return await _at_terminal(session, *terminal, interrupts)
            return await _from_pipe(session, view, interrupts)
        finally:
            await session.close(interrupts)


def _attached(remote: RemoteSession, view: View) -> RemoteSession:
    for turn in remote.hello.running:
        view.say(f"still working on: {turn.question}")
        view.busy()
    return remote


async def _local(settings: Settings, view: View, attach_only: ConfigError | None) -> LocalSession:
    if attach_only is not None:
        raise attach_only
    await _no_cluster_elsewhere(settings)
    local = LocalSession(settings, view)
    await local.start()  # resumes what a stop or crash cut short
    return local


async def _no_cluster_elsewhere(settings: Settings) -> None:
    """A gateway in this process on a cluster's store would join it as one more node: the
    chat refuses while the cluster runs (elsewhere, or from another home)."""
    from gateway.cli.gateway_api import cluster_nodes  # noqa: PLC0415

    if alive := await cluster_nodes(settings):
        leader = alive[0]  # the leader, when one leads
        raise ChatError(
            f"this home's store is a running cluster's (node {leader.name} on {leader.host} "
            "leads): chat from the home of the node that leads, or in its web chat; a chat "
            "here would join the cluster as one more node"
        )


async def _reopen(settings: Settings, view: View, attach_only: ConfigError | None) -> Session:
    """The gateway this chat attached to went away: attach to the next one, or run one in
    this process; one that is stopping or starting (it holds the home's lock, but takes no
    chat yet) is waited for, for a while."""
    deadline = time.monotonic() + STOPPING_SECONDS
    while True:
        remote = await RemoteSession.connect(socket_path(settings.data_dir), view)
        if remote is not None:
            return _attached(remote, view)
        try:
            return await _local(settings, view, attach_only)
        except AnotherInstanceRunning:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(LOCK_POLL)


class _OneShot:
    """``chat -m``: one message, and its answer. Should the gateway it attached to close
    with the ``switchboard chat`` that ran it, it goes on with the next gateway, or one of
    its own, and sends the message again under the same id: a gateway of the same home that
    journaled it already takes it as a duplicate, and answers it once. A ``switchboard run``
    that stops is not replaced (it is being stopped or restarted on purpose): it says
    whether the message was saved."""

    def __init__(
        self,
        settings: Settings,
        session: Session,
        view: View,
        interrupts: Interrupts,
        attach_only: ConfigError | None = None,
    ) -> None:
        self._settings = settings
        self._attach_only = attach_only
        self.session = session  # the one in use now
        self._view = view
        self._interrupts = interrupts
        self._id = new_id()
        self._sent = False

    async def send(self, message: str) -> int:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self._attempt(message)
            except GatewayGone as exc:
                hosted_by_chat = isinstance(self.session, RemoteSession) and (
                    self.session.hello.host == "chat"
                )
                if attempt == ATTEMPTS or not hosted_by_chat:
                    if not self._sent:
                        raise ChatError(f"{exc}; your message was not sent") from exc
                    raise  # says whether the message was saved
            await self.session.close(self._interrupts)
            self.session = await _reopen(self._settings, self._view, self._attach_only)
        raise AssertionError("unreachable")

    async def _attempt(self, message: str) -> int:
        view, interrupts = self._view, self._interrupts
        if not self._sent:
            if not await _settle(self.session, view, interrupts):  # earlier questions first
                return INTERRUPTED
            view.earlier = False
        self._sent = True  # from now on the answers are this message's (or its followers')
        await self.session.submit(message, self._id)
        view.busy()
        if not await _settle(self.session, view, interrupts):
            return INTERRUPTED
        return 1 if view.notices else 0


async def _from_pipe(session: Session, view: View, interrupts: Interrupts) -> int:
    """One line at a time: each waits for the answer to the one before."""
    from gateway.cli.chat.prompt import LEAVE, LineReader  # noqa: PLC0415

    reader = LineReader()
    if not await _settle(session, view, interrupts):
        return INTERRUPTED
    while True:
        try:
            text = await _unless_interrupted(reader.read(), interrupts)
        except Interrupted:
            return INTERRUPTED
        if text is None:
            return 0
        text = text.strip()
        if text.lower() in LEAVE:
            return 0
        if not text:
            continue
        await session.submit(text)
        view.busy()
        if not await _settle(session, view, interrupts):
            return INTERRUPTED


async def _at_terminal(
    session: Session, view: RichView, prompt: PromptReader, interrupts: Interrupts
) -> int:
    """The prompt stays open: what is typed while a turn runs is sent at once."""
    from gateway.cli.chat.prompt import LEAVE, LOCAL_COMMANDS, Key  # noqa: PLC0415

    work = _Work(session, view)
    work.watch()  # what was asked before this window opened
    try:
        async with prompt:
            while True:
                try:
                    typed = await _unless_interrupted(prompt.read(), interrupts, session)
                except Interrupted:
                    return work.leave(INTERRUPTED)
                if typed is Key.CTRL_C:
                    if not work.busy or work.stopping:
                        return work.leave(0)  # left as the user asked, like Ctrl-D
                    await work.stop()
                    continue
                text = "" if typed is None else typed.strip()
                if typed is None or text.lower() in LEAVE:
                    return work.leave(0)
                if not text:
                    continue
                view.sent(text)
                if text.lower() == "/help":  # the gateway lists its commands; these are ours
                    view.say("here: " + " · ".join(f"{c} {h}" for c, h in LOCAL_COMMANDS.items()))
                await session.submit(text)
                view.busy()
                work.watch()
    finally:
        await work.close()


class _Work:
    """What the chat has under way: from a message sent until the gateway says nothing of
    the chat is waiting, running or unsent (``busy``)."""

    def __init__(self, session: Session, view: View) -> None:
        self._session = session
        self._view = view
        self._until_idle: asyncio.Task[None] | None = None
        self.stopping = False  # Ctrl-C asked the running turn to stop

    @property
    def busy(self) -> bool:
        return self._until_idle is not None and not self._until_idle.done()

    def watch(self) -> None:
        """A message was just sent (or may be under way already): busy until idle. A fresh
        wait each time: an older one may have seen the chat idle before this message."""
        if self._until_idle is not None:
            self._until_idle.cancel()
        self.stopping = False
        self._until_idle = asyncio.create_task(self._wait())

    async def _wait(self) -> None:
        with contextlib.suppress(ChatError):  # the gateway went away: session.lost() says so
            await self._session.wait_idle()
        self._view.idle()

    async def stop(self) -> None:
        """Ask the running turn to stop, as ``/stop`` does from any channel."""
        self.stopping = True
        self._view.say(STOPPING)
        await self._session.submit("/stop")

    def leave(self, code: int) -> int:
        """The exit status; says what becomes of the work under way (an in-process gateway
        says it as it stops: gateway/cli/stopping.py)."""
        if self.busy and not self.stopping and self._session.attached:
            self._view.idle()
            self._view.say(LEFT_ATTACHED)
        return code

    async def close(self) -> None:
        if self._until_idle is not None:
            self._until_idle.cancel()
            await asyncio.gather(self._until_idle, return_exceptions=True)
        self._view.idle()


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) came before the awaited work finished."""


async def _unless_interrupted(
    work: Awaitable[T], interrupts: Interrupts, session: Session | None = None
) -> T:
    """The result of ``work``; raises :class:`Interrupted` (cancelling it) on a signal, and
    :class:`ChatError` when ``session``'s gateway goes away first."""
    task = asyncio.ensure_future(work)
    stops = {asyncio.ensure_future(interrupts.next())}
    if session is not None:
        stops.add(asyncio.ensure_future(session.lost()))
    done, pending = await asyncio.wait({task, *stops}, return_when=asyncio.FIRST_COMPLETED)
    for waiting in pending:
        waiting.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if task in done:
        return task.result()
    for stop in done:
        stop.result()  # the gateway went away: raises its ChatError
    raise Interrupted


async def _settle(session: Session, view: View, interrupts: Interrupts) -> bool:
    """Wait until the chat has nothing waiting, running or unsent; False on Ctrl-C."""
    try:
        await _unless_interrupted(session.wait_idle(), interrupts)
    except Interrupted:
        pass
    else:
        view.idle()
        return True
    view.idle()
    if session.attached:
        view.say(LEFT_ATTACHED)
    return False
