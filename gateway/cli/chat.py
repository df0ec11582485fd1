"""``switchboard chat``: the agent in this terminal, in-process (same journal, loop and
guards as the channels)."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config.settings import Settings


async def chat(settings: Settings, message: str | None) -> int:
    from channels.terminal import TerminalChannel  # noqa: PLC0415
    from gateway.runtime.app import Gateway  # noqa: PLC0415

    interactive = message is None
    terminal = TerminalChannel(prefix="assistant> " if interactive else "")
    async with Gateway(settings, channels=[terminal]) as gateway:
        await gateway.wait_idle(terminal.name)  # answers to messages a crash interrupted
        if message is not None:
            await terminal.submit(message)
            await gateway.wait_idle(terminal.name)
            return 1 if terminal.notices else 0
        print(f"Switchboard chat ({settings.llm.model}). /help for commands, Ctrl-D to leave.")
        reader = await _stdin_reader()
        while True:
            print("you> ", end="", flush=True)
            line = await reader.readline()
            if not line:
                print()
                return 0
            text = line.decode("utf-8", errors="replace").strip()
            if text in ("exit", "quit"):
                return 0
            if text:
                await terminal.submit(text)
                await gateway.wait_idle(terminal.name)


async def _stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader
