"""``switchboard doctor``'s IRC check: connect (TLS as configured), register (SASL
included), QUIT. Nothing is joined or sent. No connection is "cannot reach"; a refused
login names the setting to fix."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from channels.irc.client import open_connection
from channels.irc.registration import Refused, register
from channels.irc.settings import IrcSettings
from gateway.core.errors import ChannelPermanentError, ChannelTransientError

TIMEOUT = 15.0


async def probe(settings: IrcSettings) -> str:
    host, port = settings.address
    where = f"{host}:{port}" + (" (TLS)" if settings.tls else "")
    try:
        reader, writer = await open_connection(settings)
    except ssl.SSLError as exc:
        raise ChannelPermanentError(
            f"TLS with {where} failed ({exc.reason or exc}); check irc.port and irc.tls"
        ) from None
    except (OSError, TimeoutError) as exc:
        raise ChannelTransientError(f"cannot reach {where} ({exc or type(exc).__name__})") from None
    try:
        try:
            async with asyncio.timeout(TIMEOUT):
                nick = await register(settings, reader, writer)
        except Refused as exc:
            raise ChannelPermanentError(f"{where}: {exc}") from None
        except (OSError, TimeoutError, ConnectionError) as exc:
            raise ChannelTransientError(
                f"{where} did not register us ({exc or type(exc).__name__})"
            ) from None
        writer.write(b"QUIT :switchboard doctor\r\n")
        with contextlib.suppress(OSError):
            await writer.drain()
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    taken = "" if nick == settings.nick else f" ({settings.nick} is taken)"
    return f"{nick} on {where}{taken}"
