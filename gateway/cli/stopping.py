"""Ctrl-C and SIGTERM for commands that run a gateway (``run``, in-process ``chat``).

The first signal asks to stop: running turns get a drain period, and the user is told so at
once ("stopping: waiting up to 10 s for 1 turn (Ctrl-C again to stop now)"). The second
stops now: the turns are cut (they resume from their drafts at the next start) and the rest
of the shutdown still runs, so connections and sessions close cleanly.

In ``switchboard chat`` at a terminal, Ctrl-C is a key while the prompt is open (it stops the
running answer, gateway/cli/chat/command.py); once the chat leaves, it is a signal again, as here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Self, TextIO

if TYPE_CHECKING:
    from gateway.runtime.app import Gateway

log = logging.getLogger(__name__)

DRAIN_SECONDS = 10.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """Counts SIGINT/SIGTERM while installed (``with Interrupts() as interrupts``)."""

    def __init__(self) -> None:
        self._received: asyncio.Queue[int] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> Self:
        self._loop = asyncio.get_running_loop()
        for signum in SIGNALS:
            self._loop.add_signal_handler(signum, self._received.put_nowait, signum)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None:
            for signum in SIGNALS:
                self._loop.remove_signal_handler(signum)

    async def next(self) -> int:
        """Wait for the next signal; returns its number."""
        return await self._received.get()

    def pending(self) -> bool:
        return not self._received.empty()


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


async def stop_gateway(
    gateway: Gateway,
    interrupts: Interrupts,
    *,
    drain_seconds: float = DRAIN_SECONDS,
    out: TextIO | None = None,
) -> None:
    """Stop ``gateway``, saying what it waits for; a further signal cuts the wait short."""
    out = out or sys.stderr
    work = [
        plural(count, what)
        for count, what in (
            (gateway.dispatcher.running_turns, "turn"),
            (len(gateway.subagents.running()), "background task"),
        )
        if count
    ]
    if work:
        print(
            f"stopping: waiting up to {drain_seconds:g} s for {' and '.join(work)} "
            "(Ctrl-C again to stop now)",
            file=out,
            flush=True,
        )
    log.info("stopping (%s)", ", ".join(work) + " running" if work else "nothing running")
    now = asyncio.Event()
    stopping = asyncio.create_task(gateway.stop(drain_timeout=drain_seconds, now=now))
    second = asyncio.create_task(interrupts.next())
    try:
        done, _ = await asyncio.wait({stopping, second}, return_when=asyncio.FIRST_COMPLETED)
        if second in done:
            if work:
                print("stopping now; what was cut resumes at the next start", file=out, flush=True)
            now.set()
        await stopping
        log.info("stopped")
    finally:
        second.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await second
