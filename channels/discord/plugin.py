"""The Discord channel as the gateway knows it (:mod:`gateway.config.plugins`): its
section, ``[discord]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard
--channel discord`` sets it up. Imported at every start, so it imports no SDK:
:func:`create` loads discord.py, when the token is set."""

from __future__ import annotations

from channels.discord.settings import DiscordSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question, pair_to_own
from gateway.core.channel import Channel, ChannelContext


def create(section: DiscordSettings, context: ChannelContext) -> Channel:
    from channels.discord.adapter import DiscordChannel  # noqa: PLC0415 - the SDK when on

    return DiscordChannel(section, context)


async def greet(section: DiscordSettings, to: str, text: str) -> str:
    from channels.discord.probe import greet  # noqa: PLC0415 - the SDK when asked

    return await greet(section, to, text)


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
        next_step=pair_to_own("DM your bot"),
    ),
    loggers=("discord",),
)
