"""``switchboard doctor``'s Telegram check: one ``getMe`` with the configured token and server.

It uses a ``Bot`` of its own with short timeouts, closed afterwards, so a check never
touches the channel's connection pool, its webhook or its update offset (it could run next
to a live gateway). ``Bot.initialize`` is avoided on purpose: its error message quotes the
token. The token is used exactly as the channel uses it (not stripped), so white space
around it is reported here instead of passing the check and failing every request later.
"""

from __future__ import annotations

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

from channels.telegram.sender import retry_after_seconds
from channels.telegram.settings import TelegramSettings
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError

DEFAULT_BASE_URL = "https://api.telegram.org"
TIMEOUT = 10.0


async def probe(settings: TelegramSettings) -> str:
    """``@username`` of the bot the token belongs to, or a typed error saying what to fix."""
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
            bot = Bot(
                token,
                base_url=f"{root}/bot",
                base_file_url=f"{root}/file/bot",
                request=request,
                get_updates_request=request,
            )
            me = await bot.get_me()
    except (InvalidToken, Forbidden) as exc:
        raise ChannelPermanentError(f"{where} refused the token ({clean(exc)}); {hint}") from None
    except RetryAfter as exc:
        raise ChannelRateLimited(retry_after_seconds(exc), f"{where} asked us to wait") from None
    except BadRequest as exc:  # a NetworkError subclass, but a 400 is an answer
        raise ChannelPermanentError(
            f"{where} answered getMe with an error ({clean(exc)}); {hint}"
        ) from None
    except NetworkError as exc:  # connection failures, timeouts, 5xx
        raise ChannelTransientError(f"cannot reach {where} ({clean(exc)})") from None
    except TelegramError as exc:
        raise ChannelPermanentError(
            f"{where} answered getMe with an error ({clean(exc)}); {hint}"
        ) from None
    return f"@{me.username}" if me.username else f"bot {me.id}"
