"""``switchboard doctor``'s Discord check: ``GET /users/@me`` with the bot token, no gateway;
and ``onboard --channel discord``'s test message, a DM.

discord.py's own ``HTTPClient.static_login`` makes exactly that call (it is the first half of
``Client.login``), against ``discord.http.Route.BASE`` like every other REST call, and opens
no websocket. A client of its own, closed afterwards, so a check never shares the running
channel's session or rate-limit state, and that gives up on a rate limit longer than
:data:`MAX_WAIT` instead of sleeping through it (the constructor raises any limit below 30 s
to 30 s, past the doctor's own time limit, so it is set on the instance).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import discord
from discord.http import HTTPClient, Route, handle_message_parameters

from channels.discord.render import NO_EMBEDS
from channels.discord.settings import DiscordSettings
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError

MAX_WAIT = 5.0  # seconds of a rate limit the check waits out
HINT = "check SWITCHBOARD_DISCORD__TOKEN (Developer Portal > your app > Bot > Reset Token)"


async def probe(settings: DiscordSettings) -> str:
    """``name#discriminator`` (or ``@name``) and id of the bot, or a typed error."""
    async with own_client(settings, "GET /users/@me") as (_, data):
        pass
    name = str(data.get("username") or "?")
    discriminator = str(data.get("discriminator") or "0")
    handle = f"@{name}" if discriminator == "0" else f"{name}#{discriminator}"
    return f"{handle} (bot {data.get('id')})"


async def greet(settings: DiscordSettings, to: str, text: str) -> str:
    """``switchboard onboard --channel discord``'s test message: ``text`` in a DM to the
    user ``to`` (who must share a server with the bot)."""
    if not to.isdigit():
        raise ChannelPermanentError(f"{to!r} is not a Discord user id (Copy User ID)")
    refused = "add the bot to a server you are in first (Setup, step 3)"
    async with own_client(settings, "the DM", refused=refused) as (http, _):
        dm = await http.start_private_message(int(to))
        with handle_message_parameters(content=text, flags=NO_EMBEDS) as params:
            sent = await http.send_message(dm["id"], params=params)
    return f"message {sent['id']}"


@asynccontextmanager
async def own_client(
    settings: DiscordSettings, what: str, *, refused: str = ""
) -> AsyncIterator[tuple[HTTPClient, dict[str, Any]]]:
    """A REST client of its own, logged in (with the bot's ``/users/@me``), for calls whose
    errors become typed ones saying what to fix (``refused``: what to do about a refusal
    other than the token's)."""
    token = settings.token.get_secret_value().strip() if settings.token else ""
    where = Route.BASE.split("/api/")[0]
    http = HTTPClient(asyncio.get_running_loop())
    http.max_ratelimit_timeout = MAX_WAIT
    try:
        try:
            data = await http.static_login(token)
        except discord.Forbidden as exc:
            raise ChannelPermanentError(
                f"Discord refused the bot token ({exc.status} {exc.text}); {HINT}"
            ) from None
        yield http, dict(data)
    except discord.LoginFailure:
        raise ChannelPermanentError(f"Discord refused the bot token (401); {HINT}") from None
    except discord.RateLimited as exc:
        raise ChannelRateLimited(exc.retry_after, "Discord asked us to wait") from None
    except discord.HTTPException as exc:
        if exc.status == 429:  # without Cloudflare's Via header: a ban on this address
            wait = exc.response.headers.get("Retry-After", "")
            seconds = float(wait) if wait.replace(".", "", 1).isdigit() else 60.0
            raise ChannelRateLimited(seconds, f"{where} refused requests from here") from None
        if exc.status >= 500:
            raise ChannelTransientError(f"cannot reach {where} ({exc.status})") from None
        raise ChannelPermanentError(
            f"{where} answered {what} with {exc.status} {exc.text}; {refused or HINT}"
        ) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise ChannelTransientError(f"cannot reach {where} ({exc or type(exc).__name__})") from None
    finally:
        await http.close()
