"""``switchboard chat``: talk to the agent in the terminal.

With a gateway running (``switchboard run``, or another ``switchboard chat``) the chat
attaches to it through the local socket in the data directory; otherwise it runs a gateway
in this process (which others may attach to in turn). Either way it is the same
conversation: the ``terminal`` channel's chat ``local``.

``switchboard chat -m TEXT`` sends one message, prints the answer and exits: 0, or 1 when
the answer was a failure notice. With stdout not a terminal it prints the answer's text
and nothing else (notes go to stderr), for scripts.

Ctrl-C while the agent works: an in-process gateway stops, saying what it waits for, and a
second Ctrl-C stops it at once (the turn resumes at the next start); an attached chat just
leaves (the running gateway finishes the turn; the answer shows in the next chat window).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

from rich.console import Console

from channels.terminal import socket_path
from gateway.cli.chat_session import LocalSession, RemoteSession
from gateway.cli.chat_view import PlainView, RichView
from gateway.cli.stopping import Interrupts
from gateway.config.settings import Settings

INTERRUPTED = 130
HINTS = "Enter sends · Alt-Enter or a trailing \\ for a new line · /help · Ctrl-D leaves"

T = TypeVar("T")
View = RichView | PlainView
Session = LocalSession | RemoteSession


async def chat(settings: Settings, message: str | None) -> int:
    interactive = message is None
    at_terminal = sys.stdout.isatty() and (not interactive or sys.stdin.isatty())
    view: View = (
        RichView(Console(highlight=False))
        if at_terminal
        else PlainView(
            prefix="assistant> " if interactive else "",
            notes=sys.stdout if interactive else sys.stderr,
        )
    )
    with Interrupts() as interrupts:
        remote = await RemoteSession.connect(socket_path(settings.data_dir), view)
        if interactive:
            where = "attached to the running gateway" if remote else "gateway in this process"
            view.say(
                f"Switchboard chat · {settings.agent.name} · model {settings.llm.model} ({where})"
            )
            if at_terminal:
                view.say(HINTS)
        session: Session
        if remote is None:
            session = LocalSession(settings, view)
            await session.start()  # resumes what a stop or crash cut short
        else:
            session = remote
            for turn in remote.hello.running:
                view.say(f"still working on: {turn.question}")
                view.busy()
        try:
            if message is not None:
                return await _one_shot(session, view, message, interrupts)
            return await _conversation(session, view, settings, interrupts, at_terminal)
        finally:
            await session.close(interrupts)


async def _one_shot(session: Session, view: View, message: str, interrupts: Interrupts) -> int:
    if not await _settle(session, view, interrupts):  # earlier questions first
        return INTERRUPTED
    await session.submit(message)
    view.busy()
    if not await _settle(session, view, interrupts):
        return INTERRUPTED
    return 1 if view.notices else 0


async def _conversation(
    session: Session, view: View, settings: Settings, interrupts: Interrupts, at_terminal: bool
) -> int:
    from gateway.cli.chat_prompt import LEAVE, LineReader, PromptReader  # noqa: PLC0415

    reader = PromptReader(settings.data_dir) if at_terminal else LineReader()
    if not await _settle(session, view, interrupts):
        return INTERRUPTED
    while True:
        view.prompting = True
        try:
            text = await _unless_interrupted(reader.read(), interrupts)
        except Interrupted:
            return INTERRUPTED
        finally:
            view.prompting = False
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


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) came before the awaited work finished."""


async def _unless_interrupted(work: Awaitable[T], interrupts: Interrupts) -> T:
    """The result of ``work``; raises :class:`Interrupted` (cancelling it) on a signal."""
    task = asyncio.ensure_future(work)
    signal = asyncio.create_task(interrupts.next())
    done, _ = await asyncio.wait({task, signal}, return_when=asyncio.FIRST_COMPLETED)
    for pending in (task, signal):
        if pending not in done:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
    if task in done:
        return task.result()
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
        view.say(
            "left the chat; the gateway finishes what you asked, and the answer shows the "
            "next time you open `switchboard chat`"
        )
    return False
