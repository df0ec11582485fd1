"""The Discord channel as the gateway knows it (:mod:`gateway.config.plugins`): its
section, ``[discord]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard
--channel discord`` sets it up. Imported at every start, so it imports no SDK:
:func:`create` loads discord.py, when the token is set."""

from __future__ import annotations

from pathlib import Path

from channels.discord.settings import DiscordSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question
from gateway.core.channel import Channel, ChannelContext


def create(section: DiscordSettings, context: ChannelContext) -> Channel:
    from channels.discord.adapter import DiscordChannel  # noqa: PLC0415 - the SDK when on

    return DiscordChannel(section, context)


async def greet(section: DiscordSettings, to: str, text: str) -> str:
    from channels.discord.probe import greet  # noqa: PLC0415 - the SDK when asked

    return await greet(section, to, text)


def next_step(section: DiscordSettings, env_file: Path) -> str | None:
    if section.owners:
        return None
    return (
        "start `switchboard run`, DM your bot, and approve the pairing code it answers with "
        "`switchboard pairing approve CODE --owner` (you are its owner from then on)"
    )


PLUGIN = ChannelPlugin(
    name="discord",
    title="Discord",
    settings=DiscordSettings,
    create=create,
    onboarding=Onboarding(
        questions=(
            Question(
                "token", "The bot's token (Developer Portal > Bot > Reset Token)", secret=True
            ),
            Question(
                "allow_from",
                "Your user id, to be its owner (Developer Mode > Copy User ID; empty: pair later)",
            ),
        ),
        greet=greet,
        next_step=next_step,
    ),
    loggers=("discord",),
)
