"""The walk of one message: which of our modules a plain Telegram text passes, in order.

Run from the repository root: ``python -m bench.walk [--all]``.

One gateway in this process (the real Telegram channel against the fake Bot API, the fake
LLM answering at once, streaming by edits off as in a group), one warm-up message, then one
plain text message traced from the moment it is available to ``getUpdates`` until its answer
reached the fake and the gateway is idle. Every call made into a function of ``gateway/``,
``channels/`` or ``agent/`` from another module is an event (a coroutine resuming after an
``await`` is not a new call). The walk is that sequence of modules with repeats in a row
folded; *modules* counts the distinct ones and *returns* counts the steps back into a module
the walk had already left.

By default the leaves are left out: modules that only hold values and pure helpers, which
any step may call (``gateway/core/messages.py``, logging, configuration, the store's own SQL
plumbing). ``--all`` keeps them. docs/architecture.md quotes both counts.
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
# Value types, pure helpers and plumbing every step may use: not places a message "goes".
LEAVES = (
    "gateway/core/",
    "gateway/config/",
    "gateway/store/db.py",
    "gateway/store/sql.py",
    "gateway/store/sqlite.py",
    "gateway/store/postgres.py",
    "channels/_text.py",
    "agent/llm/types.py",
    "agent/tokens.py",
)


def module_of(filename: str) -> str | None:
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if relative.parts[0] not in PACKAGES:
        return None
    return relative.as_posix()


RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


@cache
def first_resume(code: CodeType) -> int:
    """The offset at which a generator or coroutine starts running on its first send."""
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")


def resuming(frame: FrameType) -> bool:
    """A generator or coroutine continuing after a yield or an await, not a new call."""
    code = frame.f_code
    return bool(code.co_flags & RESUMABLE) and frame.f_lasti > first_resume(code)


class Walk:
    """Records the cross-module calls into our code while it is on."""

    def __init__(self, *, leaves: bool) -> None:
        self.leaves = leaves
        self.events: list[str] = []
        # (module called back, the module calling it): a call into a module that is already
        # on the stack below, i.e. the walk going back to where it came from
        self.returns: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.on = False

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event != "call":
            return
        module = module_of(frame.f_code.co_filename)
        if module is None:
            return
        if resuming(frame):
            return
        caller = frame.f_back
        caller_module = None if caller is None else module_of(caller.f_code.co_filename)
        if caller_module == module:
            return
        if not self.leaves and module.startswith(LEAVES):
            return
        back = caller.f_back if caller is not None else None
        on_stack = False
        while back is not None:
            if module_of(back.f_code.co_filename) == module:
                on_stack = True
                break
            back = back.f_back
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


async def trace_one_message(*, leaves: bool) -> Walk:
    from gateway.config.settings import Settings
    from gateway.runtime.app import Gateway
    from gateway.runtime.home import onboard
    from tests.fakes.llm import FakeLLM
    from tests.fakes.telegram import FakeTelegram, fast_channel

    walk = Walk(leaves=leaves)
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
                    walk.on = False
    finally:
        await tg.stop()
        await llm.stop()
    return walk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="keep value and helper modules too")
    args = parser.parse_args()
    quiet_proxies()
    walk = asyncio.run(trace_one_message(leaves=args.all))
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
