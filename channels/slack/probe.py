"""``switchboard doctor``'s Slack check: ``auth.test`` with the bot token, and in Socket Mode
``apps.connections.open`` with the app token (it hands out a websocket URL; nothing connects
to it), both against ``slack.base_url``; and ``onboard --channel slack``'s test message.

A Web API client of its own without retry handlers, so a check never waits out a long
Retry-After and never shares the running channel's client.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.render import NO_UNFURL
from channels.slack.settings import SlackSettings
from gateway.core.errors import ChannelPermanentError, ChannelRateLimited, ChannelTransientError

DEFAULT_BASE_URL = "https://slack.com/api/"
TIMEOUT = 10
# Errors that mean the token itself is wrong (https://api.slack.com/methods/auth.test).
_REFUSED = {
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "missing_scope",
}


async def probe(settings: SlackSettings) -> str:
    """Who the bot token belongs to ("bot U123 (switchboard) in team Acme"), or a typed error."""
    where = "Slack" if settings.base_url == DEFAULT_BASE_URL else f"Slack at {settings.base_url}"
    bot_token = settings.bot_token.get_secret_value().strip() if settings.bot_token else ""
    client = AsyncWebClient(
        token=bot_token, base_url=settings.base_url, retry_handlers=[], timeout=TIMEOUT
    )
    auth = await _call(
        client.auth_test(), where, "auth.test", "bot token", "SWITCHBOARD_SLACK__BOT_TOKEN"
    )
    team = auth.get("team") or auth.get("team_id") or "?"
    found = f"bot {auth.get('user_id')} ({auth.get('user')}) in team {team}"
    if settings.resolved_mode == "socket" and settings.app_token is not None:
        app_token = settings.app_token.get_secret_value().strip()
        await _call(
            client.apps_connections_open(app_token=app_token),
            where,
            "apps.connections.open",
            "app token",
            "SWITCHBOARD_SLACK__APP_TOKEN (xapp-..., scope connections:write)",
        )
        found += "; Socket Mode app token ok"
    return found


async def greet(settings: SlackSettings, to: str, text: str) -> str:
    """``switchboard onboard --channel slack``'s test message: ``text`` to the member ``to``
    (``U…``), in the app's DM with them (a post to a member id goes there)."""
    if not re.fullmatch(r"[UW][A-Z0-9]{2,}", to):
        raise ChannelPermanentError(f"{to!r} is not a Slack member id (U…: Copy member ID)")
    where = "Slack" if settings.base_url == DEFAULT_BASE_URL else f"Slack at {settings.base_url}"
    bot_token = settings.bot_token.get_secret_value().strip() if settings.bot_token else ""
    client = AsyncWebClient(
        token=bot_token, base_url=settings.base_url, retry_handlers=[], timeout=TIMEOUT
    )
    posted = await _call(
        client.chat_postMessage(channel=to, text=text, **NO_UNFURL),
        where,
        "chat.postMessage",
        "bot token",
        "SWITCHBOARD_SLACK__BOT_TOKEN (scope chat:write) and the member id",
    )
    return f"message {posted.get('ts')}"


async def _call(call: Any, where: str, method: str, what: str, setting: str) -> Any:
    """Await one Web API call, turning its failures into the channel error types."""
    try:
        return await call
    except SlackApiError as exc:
        status = exc.response.status_code
        data = exc.response.data
        error = str(data.get("error") or "") if isinstance(data, dict) else ""
        if status == 429 or error == "ratelimited":
            retry_after = float(exc.response.headers.get("Retry-After", 1) or 1)
            raise ChannelRateLimited(retry_after, f"{where} asked us to wait") from None
        if status >= 500:
            raise ChannelTransientError(f"cannot reach {where} ({method}: {status})") from None
        if error in _REFUSED:
            raise ChannelPermanentError(
                f"{where} refused the {what} ({error}); check {setting}"
            ) from None
        raise ChannelPermanentError(
            f"{where} answered {method} with {status} {error or 'an unexpected body'}; "
            f"check {setting} and SWITCHBOARD_SLACK__BASE_URL"
        ) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ChannelTransientError(f"cannot reach {where} ({exc or type(exc).__name__})") from None
