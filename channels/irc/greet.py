"""``switchboard onboard --channel irc``'s test message: connect, one private message to the
nick named, QUIT."""

from __future__ import annotations

import asyncio
import contextlib

from channels.irc.client import open_connection
from channels.irc.protocol import format_line
from channels.irc.registration import Refused, register
from channels.irc.settings import IrcSettings
from gateway.core.errors import ChannelPermanentError


async def greet(settings: IrcSettings, to: str, text: str) -> str:
    """Send ``text`` to the nick of ``to`` (a nick or a mask); returns the nick."""
    nick = to.split("!", 1)[0]
    if not nick or "*" in nick or "?" in nick:
        raise ChannelPermanentError(f"{to!r} names no one nick to write to")
    reader, writer = await open_connection(settings)
    try:
        async with asyncio.timeout(30):
            await register(settings, reader, writer)
        for line in (format_line("PRIVMSG", nick, text), "QUIT :set up"):
            writer.write(line.encode() + b"\r\n")
        await writer.drain()
    except Refused as exc:
        raise ChannelPermanentError(str(exc)) from None
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return nick
