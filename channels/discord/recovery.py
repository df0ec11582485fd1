"""What a lost send left in a Discord channel, read back from the channel itself.

Two things make a repeated Discord send safe. Each part of a message is posted with a
``nonce`` derived from the outbox key and the part, with ``enforce_nonce``: within a few
minutes Discord answers a repeat with the message it already has. And the bot can read the
channel back: message ids are snowflakes, which carry their creation time, so
``GET /channels/{id}/messages?after=<snowflake of the first lost attempt>`` lists everything
posted since (:func:`find`, one call). The bot's own messages in that list that the store
does not know of are what the lost attempts left: parts of this message (recognised by
their text, left as they are) and posts of streamed drafts whose id was lost. The message
is then delivered into them: a part that shows already stays, a draft is edited into a
part, the rest is posted (with the nonces) and what is left over is deleted.

Where it cannot decide: without the Read Message History permission the listing is refused;
then only the nonces protect (a repeat within their few minutes returns the first message;
a stray draft stays beside the answer), and the log says so. A message the person deleted
in between is posted again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import discord

from channels.discord.sender import mapped_errors
from gateway.core.channel import LostSend
from gateway.core.errors import ChannelPermanentError

log = logging.getLogger(__name__)

CLOCK_SKEW = 5.0  # seconds before the first lost attempt the listing starts
MAX_LISTED = 100  # messages read back (Discord's page)


@dataclass(frozen=True, slots=True)
class Found:
    """A message of the bot's that the store has no record of."""

    id: int
    content: str


async def target(client: discord.Client, lost: LostSend) -> discord.abc.Messageable:
    message = lost.message
    if message.direct:  # addressed by user id: the DM channel with them
        with mapped_errors():
            return await client.create_dm(discord.Object(id=int(message.chat_id)))
    return client.get_partial_messageable(int(message.thread_id or message.chat_id))


async def find(client: discord.Client, lost: LostSend) -> list[Found]:
    """The bot's messages in the chat since the first lost attempt that the store does not
    know (none, when the bot may not read the channel's history), oldest first."""
    me = client.user
    if me is None:
        return []
    since = datetime.fromtimestamp(lost.since - CLOCK_SKEW, UTC)
    after = discord.Object(id=discord.utils.time_snowflake(since))
    known = {k.message_id for k in lost.known} | set(lost.drafts)
    channel = await target(client, lost)
    try:
        with mapped_errors():
            return [
                Found(message.id, message.content)
                async for message in channel.history(
                    after=after, limit=MAX_LISTED, oldest_first=True
                )
                if message.author.id == me.id and str(message.id) not in known
            ]
    except ChannelPermanentError as exc:
        log.warning(
            "discord: cannot read back channel %s (%s): an interrupted send there is "
            "repeated with its nonces only (give the bot Read Message History)",
            lost.message.chat_id,
            exc,
        )
        return []
