"""What Slack does not send with an event and a turn needs: a thread's parent message, people's
names, and the channels the bot is in (for the ``chats`` tool).

Every lookup is best effort: a refused or failed call (a missing scope, a rate limit) leaves
the message without its thread parent or a name, and never keeps a message from the journal.
Names are cached for the life of the process.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.convert import plain_text
from gateway.core.channel import DirectoryEntry
from gateway.core.messages import ChatType, InboundMessage, Said

log = logging.getLogger(__name__)

QUOTE_MAX_CHARS = 4_000
MAX_CHANNELS = 500  # listed for the chats tool: a few pages of conversations.list


class SlackLookups:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._names: dict[str, str] = {}

    async def thread_parent(self, msg: InboundMessage, bot_user_id: str | None) -> Said | None:
        """The message that started ``msg``'s thread (``None`` outside a thread, or when
        Slack will not say)."""
        if msg.thread_id is None:
            return None
        try:
            answer = await self._client.conversations_replies(
                channel=msg.chat_id, ts=msg.thread_id, limit=1, inclusive=True
            )
        except (SlackApiError, OSError, TimeoutError) as exc:
            log.info("slack: no thread parent for %s: %s", msg.platform_message_id, exc)
            return None
        messages: list[dict[str, Any]] = list(answer.get("messages") or [])
        parent = next((m for m in messages if m.get("ts") == msg.thread_id), None)
        if parent is None:
            return None
        text = plain_text(str(parent.get("text") or ""), bot_user_id)
        if not text:
            return None
        if len(text) > QUOTE_MAX_CHARS:
            text = text[:QUOTE_MAX_CHARS] + "…"
        user = str(parent.get("user") or "")
        by_bot = bool(parent.get("bot_id")) and (not user or user == bot_user_id)
        by_bot = by_bot or (bot_user_id is not None and user == bot_user_id)
        author = "you" if by_bot else await self.name_of(user)
        try:
            at: float | None = float(str(parent.get("ts")))
        except ValueError:
            at = None
        return Said(author, text, at=at, by_bot=by_bot)

    async def name_of(self, user: str) -> str:
        """A person's display name (their id when Slack will not say)."""
        if not user:
            return "someone"
        if user in self._names:
            return self._names[user]
        name = user
        try:
            answer = await self._client.users_info(user=user)
            profile = (answer.get("user") or {}).get("profile") or {}
            name = str(profile.get("display_name") or profile.get("real_name") or user)
        except (SlackApiError, OSError, TimeoutError) as exc:
            log.info("slack: no name for %s: %s", user, exc)
        self._names[user] = name
        return name

    async def channels(self) -> list[DirectoryEntry]:
        """The channels the bot is a member of, by name."""
        entries: list[DirectoryEntry] = []
        cursor: str | None = None
        while len(entries) < MAX_CHANNELS:
            answer = await self._client.conversations_list(
                types="public_channel,private_channel",
                exclude_archived=True,
                limit=200,
                **({"cursor": cursor} if cursor else {}),
            )
            for channel in answer.get("channels") or []:
                if channel.get("is_member"):
                    name = f"#{channel.get('name', channel.get('id'))}"
                    entries.append(DirectoryEntry(str(channel["id"]), name, ChatType.GROUP))
            cursor = ((answer.get("response_metadata") or {}).get("next_cursor")) or None
            if not cursor:
                break
        return entries
