"""Our commands as Discord application commands, so ``/`` in Discord lists them.

They are registered globally for the application (``PUT /applications/{id}/commands``,
overwriting the set) once READY says which application the bot is, and again only when
the set changes: a digest of what was registered is kept in the data directory
(``channels/discord.json``). An invocation arrives as an ``APPLICATION_COMMAND``
interaction and becomes the person's own message (``/stop``, ``/approve K7QW2M9P``): it is
journaled, then answered with a short private note; the gateway's answer comes as a
message like any other.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import discord

from channels.discord.convert import CHANNEL
from gateway.core.commands import COMMANDS
from gateway.core.messages import ChatType, InboundMessage

log = logging.getLogger(__name__)

EPHEMERAL = 64


def payload() -> list[dict[str, Any]]:
    return [
        {
            "name": name.lstrip("/"),
            "description": text[:100],
            "type": 1,  # a slash command
            "options": [
                {
                    "type": 3,
                    "name": "text",
                    "description": "what follows the command",
                    "required": False,
                }
            ],
        }
        for name, text in COMMANDS.items()
    ]


async def register(client: discord.Client, state: Path) -> None:
    """Register the commands unless this exact set is registered already. Cosmetic: a
    failure is logged and the commands still work typed."""
    wanted = payload()
    application = client.application_id
    if application is None:
        return
    digest = hashlib.sha256(json.dumps([application, wanted], sort_keys=True).encode()).hexdigest()
    if await asyncio.to_thread(_registered, state) == digest:
        return
    try:
        await client.http.bulk_upsert_global_commands(application, wanted)
    except discord.HTTPException as exc:
        log.warning("discord: could not register the command list: %s", exc)
        return
    await asyncio.to_thread(_remember, state, digest)


def _registered(state: Path) -> str | None:
    try:
        known = json.loads(state.read_text(encoding="utf-8")).get("commands")
    except (OSError, ValueError, AttributeError):
        return None
    return known if isinstance(known, str) else None


def _remember(state: Path, digest: str) -> None:
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"commands": digest}), encoding="utf-8")


def convert(interaction: discord.Interaction) -> InboundMessage | None:
    """An invoked application command as the person's own message."""
    if interaction.type is not discord.InteractionType.application_command:
        return None
    data: dict[str, Any] = dict(interaction.data or {})
    name = data.get("name")
    if not name or interaction.user is None or interaction.channel_id is None:
        return None
    options = [o for o in data.get("options") or [] if o.get("name") == "text"]
    text = f"/{name} {options[0].get('value', '') if options else ''}".strip()
    return InboundMessage(
        channel=CHANNEL,
        chat_id=str(interaction.channel_id),
        sender_id=str(interaction.user.id),
        sender_name=interaction.user.display_name,
        text=text,
        platform_message_id=f"interaction:{interaction.id}",
        chat_type=ChatType.DM if interaction.guild_id is None else ChatType.GROUP,
        mentioned=True,
    )


async def acknowledge(interaction: discord.Interaction, text: str) -> None:
    """Discord waits 3 s for an answer to the invocation: a private note that it arrived."""
    try:
        await interaction.response.send_message(f"`{text}`", ephemeral=True, suppress_embeds=True)
    except (discord.HTTPException, discord.InteractionResponded) as exc:
        log.info("discord: could not answer the command %s: %s", interaction.id, exc)
