"""The Discord channel as the gateway knows it (:mod:`gateway.config.plugins`): its
section, ``[discord]`` (:mod:`.settings`), and how to build it. Imported at every start, so
it imports no SDK: :func:`create` loads discord.py, when the token is set."""

from __future__ import annotations

from channels.discord.settings import DiscordSettings
from gateway.config.plugins import ChannelPlugin
from gateway.core.channel import Channel, ChannelContext


def create(section: DiscordSettings, context: ChannelContext) -> Channel:
    from channels.discord.adapter import DiscordChannel  # noqa: PLC0415 - the SDK when on

    return DiscordChannel(section, context)


PLUGIN = ChannelPlugin(
    name="discord",
    title="Discord",
    settings=DiscordSettings,
    create=create,
    loggers=("discord",),
)
