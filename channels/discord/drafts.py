"""Answers streamed by editing on Discord: a draft message edited as the answer grows.

Discord allows about five edits per five seconds in a channel; the gateway edits a chat's
draft at most once a second (:data:`DRAFT_INTERVAL`), and discord.py waits out its route
buckets. Drafts are posted without a reply reference and with mentions disabled, like
every message the bot sends, and with no link embedded (``SUPPRESS_EMBEDS`` on the post
and on every edit: discord.py's ``PartialMessage.edit`` cannot send flags, so edits go
through its HTTP client). The final answer (:func:`finish`) edits the drafts into its
parts, posts what goes beyond them with the parts' nonces (a retry is answered with the
message Discord already has), and deletes drafts left over. After a crash the same function
delivers into what :mod:`channels.discord.recovery` read back from the channel.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import discord
from discord.http import handle_message_parameters

from channels._text import split_message
from channels.discord.buttons import view
from channels.discord.convert import CHANNEL
from channels.discord.render import ALLOWED_MENTIONS, MAX_MESSAGE, NO_EMBEDS, Part, render
from channels.discord.sender import mapped_errors, send_part
from gateway.core.errors import ChannelPermanentError
from gateway.core.messages import Action, ChatRef, OutboundMessage

log = logging.getLogger(__name__)

STOP = Action("Stop", "/stop", style="danger")

DRAFT_INTERVAL = 1.0  # seconds between edits of a chat's draft


def parts(text: str) -> list[str]:
    return split_message(text, MAX_MESSAGE)


def _target(client: discord.Client, chat: ChatRef) -> discord.PartialMessageable:
    return client.get_partial_messageable(int(chat.thread_id or chat.chat_id))


def _stop_button() -> discord.ui.View:
    """A Stop button under the draft: a press sends /stop from the presser, whom the
    gateway checks (channels/discord/buttons.py); the final edit takes it away."""
    return view(OutboundMessage(CHANNEL, "", "", actions=(STOP,)))


async def post(client: discord.Client, chat: ChatRef, text: str) -> str:
    with mapped_errors():
        sent = await _target(client, chat).send(
            content=text,
            allowed_mentions=ALLOWED_MENTIONS,
            view=_stop_button(),
            suppress_embeds=True,
        )
    return str(sent.id)


async def edit(
    client: discord.Client, chat: ChatRef, message_id: str, text: str, *, stop: bool = True
) -> None:
    with (
        mapped_errors(),
        handle_message_parameters(
            content=text,
            flags=NO_EMBEDS,
            allowed_mentions=ALLOWED_MENTIONS,
            view=_stop_button() if stop else None,
        ) as params,
    ):
        await client.http.edit_message(_target(client, chat).id, int(message_id), params=params)


async def delete(client: discord.Client, chat: ChatRef, message_id: str) -> None:
    try:
        with mapped_errors():
            await _target(client, chat).get_partial_message(int(message_id)).delete()
    except ChannelPermanentError as exc:  # already gone
        log.info("discord: draft %s not deleted: %s", message_id, exc)


async def finish(
    client: discord.Client,
    message: OutboundMessage,
    drafts: Sequence[str],
    shown: Mapping[str, str] | None = None,
) -> str:
    """Deliver ``message`` into the drafts: edited parts, then new ones, then clean-up.
    ``shown``: what some of them show already (read back after a crash): a draft showing
    its part exactly is left as it is."""
    rendered = render(message.text, message.attachments)
    target = _target(client, message.chat)
    shown = shown or {}
    ids: list[str] = []
    for index, part in enumerate(rendered):
        if index < len(drafts) and part.content is not None:
            draft = drafts[index]
            try:
                if shown.get(draft) != part.content:
                    await edit(client, message.chat, draft, part.content, stop=False)
            except ChannelPermanentError as exc:  # the draft was deleted: post the part
                log.info("discord: draft %s gone (%s); posting anew", draft, exc)
            else:
                ids.append(draft)
                if not part.files:
                    continue
                part = Part(None, part.files)  # noqa: PLW2901 - the files still have to go
        with mapped_errors():
            sent = await send_part(target, part, message.idempotency_key, index, None)
        ids.append(str(sent.id))
    for draft in drafts:  # left over, or could not hold a part
        if draft not in ids:
            await delete(client, message.chat, draft)
    return ",".join(ids)
