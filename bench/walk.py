"""The walk of one message: which of our modules a plain Telegram text passes, in order.

Run from the repository root: ``python -m bench.walk [--every-call]``.

One gateway in this process (the real Telegram channel against the fake Bot API, the fake
LLM answering at once, streaming by edits off), one warm-up message, then one plain text
message traced from the moment it is available to ``getUpdates`` until its answer reached
the fake, the gateway is idle and the recall indexer has made the message's vectors (work
it does in the background, a second after the commit). What this bench itself calls to
learn that (``Gateway.wait_idle``, ``RecallIndexer.idle`` and all they ask) is not part of
the walk.

A step of the walk is a call into a function of ``gateway/``, ``channels/`` or ``agent/``
that is handed the message or what it becomes on its way: the platform's update, the
``InboundMessage`` and its journal record, the dispatcher's batch, the agent's
``TurnRequest``, the loop's ``TurnInputs``, the ``TurnOutcome``, the reply
(``OutboundMessage``) and its outbox record. (``--every-call`` counts every call made from
one of our modules into another instead, helpers and repositories included.) A coroutine
resuming after an ``await`` is not a new call. Printed: the modules in the order the
message first reaches them; *returns*, the calls back into a module that is already on the
call stack below (a callee calling its caller's module back: the walk going back where it
came from), each once per pair of modules; and both counts. docs/architecture.md quotes
them.
"""

from __future__ import annotations

import argparse
import asyncio
import dis
import inspect
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from bench.common import quiet_proxies

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "channels", "agent")
RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
# The shapes the message takes on its way, by class name.
CARRIERS = frozenset(
    {
        "Update",  # python-telegram-bot's
        "InboundMessage",
        "InboundRecord",
        "TurnBatch",
        "TurnRequest",
        "TurnInputs",
        "TurnOutcome",
        "OutboundMessage",
        "OutboxRecord",
    }
)


def module_of(filename: str) -> str | None:
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if relative.parts[0] not in PACKAGES:
        return None
    return relative.as_posix()


@cache
def first_resume(code: CodeType) -> int:
    """The offset at which a generator or coroutine starts running on its first send."""
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")


def resuming(frame: FrameType) -> bool:
    """A generator or coroutine continuing after a yield or an await, not a new call."""
    code = frame.f_code
    return bool(code.co_flags & RESUMABLE) and frame.f_lasti > first_resume(code)


def carries(frame: FrameType) -> bool:
    """Whether one of the call's arguments is the message in one of its shapes."""
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    for name in names:
        value = frame.f_locals.get(name)
        values = value if isinstance(value, list | tuple) else (value,)
        if any(type(v).__name__ in CARRIERS for v in values[:3]):
            return True
    return False


class Walk:
    """Records the calls into our code while it is on."""

    def __init__(self, *, every_call: bool) -> None:
        self.every_call = every_call
        self.events: list[str] = []
        # (module called back, the module calling it)
        self.returns: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.on = False

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event != "call":
            return
        module = module_of(frame.f_code.co_filename)
        if module is None or resuming(frame):
            return
        caller = frame.f_back
        caller_module = None if caller is None else module_of(caller.f_code.co_filename)
        if caller_module == module:
            return
        if not (self.every_call or carries(frame)):
            return
        back = caller.f_back if caller is not None else None
        on_stack = False
        while back is not None:
            if back.f_code is DRIVER:  # this bench waiting for the gateway to go idle
                return
            if module_of(back.f_code.co_filename) == module:
                on_stack = True
            back = back.f_back
        if caller is not None and caller.f_code is DRIVER:
            return
        with self._lock:
            self.events.append(module)
            if on_stack:
                edge = (module, caller_module or "(library)")
                self.returns[edge] = self.returns.get(edge, 0) + 1

    @contextmanager
    def tracing(self) -> Iterator[None]:
        sys.setprofile(self.profile)
        threading.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]


def fold(events: list[str]) -> list[str]:
    walk: list[str] = []
    for module in events:
        if not walk or walk[-1] != module:
            walk.append(module)
    return walk


async def trace_one_message(*, every_call: bool) -> Walk:
    from gateway.config.settings import Settings
    from gateway.runtime.app import Gateway
    from gateway.runtime.home import onboard
    from tests.fakes.llm import FakeLLM
    from tests.fakes.telegram import FakeTelegram, fast_channel

    walk = Walk(every_call=every_call)
    llm = await FakeLLM().start()
    tg = await FakeTelegram().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(
                home=Path(tmp),
                agent={"reflection": False},
                llm={
                    "provider": "openai",
                    "model": "fake-model",
                    "base_url": llm.openai_url,
                    "api_key": "sk-walk-123456",
                    "max_retries": 0,
                },
                telegram={
                    "token": tg.token,
                    "base_url": tg.base_url,
                    "allow_from": ["42"],
                    "poll_timeout_seconds": 5,
                    "streaming": False,
                },
                web={"enabled": False},
            )
            onboard(settings.home, settings.workspace_dir)
            async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
                await tg.say("warm up")
                await tg.wait_sent(1)
                await gateway.wait_idle()
                with walk.tracing():
                    walk.on = True
                    await tg.say("hello there")
                    await tg.wait_sent(2)
                    await gateway.wait_idle()
                    # its words made searchable by meaning, in the background: always in
                    # the walk, not only when the machine is slow enough for it to begin
                    await gateway.indexer.idle()
                    walk.on = False
    finally:
        await tg.stop()
        await llm.stop()
    return walk


DRIVER = trace_one_message.__code__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every-call", action="store_true", help="every call between our modules")
    args = parser.parse_args()
    quiet_proxies()
    walk = asyncio.run(trace_one_message(every_call=args.every_call))
    steps = fold(walk.events)
    print("modules, in the order the message first reaches them:")
    for index, module in enumerate(dict.fromkeys(steps), 1):
        print(f"{index:3}  {module}")
    print("\nreturns (a call back into a module already on the stack, from):")
    for (module, caller), count in sorted(walk.returns.items()):
        print(f"     {module} <- {caller}  ({count}x)")
    print(f"\n{len(set(steps))} modules, {len(walk.returns)} returns, {len(steps)} steps")


if __name__ == "__main__":
    main()
