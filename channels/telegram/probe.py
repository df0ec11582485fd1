"""``switchboard doctor``'s Telegram check: one ``getMe`` with the configured token and server;
and ``onboard --channel telegram``'s test message.

It uses a ``Bot`` of its own with short timeouts, closed afterwards, so a check never
touches the channel's connection pool, its webhook or its update offset (it could run next
to a live gateway). ``Bot.initialize`` is avoided on purpose: its error message quotes the
token. The token is used exactly as the channel uses it (not stripped), so white space
around it is reported here instead of passing the check and failing every request later.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from telegram import Bot
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest

from channels.telegram.sender import NO_PREVIEW, retry_after_seconds
from channels.telegram.settings import TelegramSettings
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError

DEFAULT_BASE_URL = "https://api.telegram.org"
TIMEOUT = 10.0


async def probe(settings: TelegramSettings) -> str:
    """``@username`` of the bot the token belongs to, or a typed error saying what to fix."""
    async with own_bot(settings, "getMe") as bot:
        me = await bot.get_me()
    return f"@{me.username}" if me.username else f"bot {me.id}"


async def greet(settings: TelegramSettings, to: str, text: str) -> str:
    """``switchboard onboard --channel telegram``'s test message: ``text`` to the chat
    ``to`` (a person's numeric id, who must have written to the bot first: a bot cannot
    start a conversation)."""
    if not to.lstrip("-").isdigit():
        raise ChannelPermanentError(f"{to!r} is not a numeric Telegram id (ask @userinfobot)")
    refused = f"write to the bot from {to}'s Telegram first (a bot cannot start a chat)"
    async with own_bot(settings, "sendMessage", refused=refused) as bot:
        sent = await bot.send_message(chat_id=int(to), text=text, link_preview_options=NO_PREVIEW)
    return f"message {sent.message_id}"


@asynccontextmanager
async def own_bot(
    settings: TelegramSettings, method: str, *, refused: str = ""
) -> AsyncIterator[Bot]:
    """A ``Bot`` of its own for one call, its errors turned into typed ones saying what to
    fix (``refused``: what to do about a refusal other than the token's)."""
    token = settings.token.get_secret_value() if settings.token else ""
    if not token.strip() or token != token.strip():
        raise ChannelPermanentError(
            "SWITCHBOARD_TELEGRAM__TOKEN is empty or has white space around it (a stray "
            "newline?); the channel sends it as written, so remove it"
        )
    root = settings.base_url.rstrip("/")
    where = "Telegram" if root == DEFAULT_BASE_URL else f"the Bot API server at {root}"
    hint = "check SWITCHBOARD_TELEGRAM__TOKEN (copy it again from @BotFather)"
    if root != DEFAULT_BASE_URL:
        hint += " and SWITCHBOARD_TELEGRAM__BASE_URL"

    def clean(exc: Exception) -> str:
        return (str(exc) or type(exc).__name__).replace(token, "<token>")

    request = HTTPXRequest(connection_pool_size=1, connect_timeout=TIMEOUT, read_timeout=TIMEOUT)
    try:
        async with request:
            yield Bot(
                token,
                base_url=f"{root}/bot",
                base_file_url=f"{root}/file/bot",
                request=request,
                get_updates_request=request,
            )
    except Forbidden as exc:
        if not refused:  # getMe: only the token can be refused
            raise ChannelPermanentError(
                f"{where} refused the token ({clean(exc)}); {hint}"
            ) from None
        raise ChannelPermanentError(f"{where} refused {method} ({clean(exc)}); {refused}") from None
    except InvalidToken as exc:
        raise ChannelPermanentError(f"{where} refused the token ({clean(exc)}); {hint}") from None
    except RetryAfter as exc:
        raise ChannelRateLimited(retry_after_seconds(exc), f"{where} asked us to wait") from None
    except BadRequest as exc:  # a NetworkError subclass, but a 400 is an answer
        raise ChannelPermanentError(
            f"{where} answered {method} with an error ({clean(exc)}); {refused or hint}"
        ) from None
    except NetworkError as exc:  # connection failures, timeouts, 5xx
        raise ChannelTransientError(f"cannot reach {where} ({clean(exc)})") from None
    except TelegramError as exc:
        raise ChannelPermanentError(
            f"{where} answered {method} with an error ({clean(exc)}); {hint}"
        ) from None
