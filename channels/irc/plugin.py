"""The IRC channel as the gateway knows it (:mod:`gateway.config.plugins`): its section,
``[irc]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard --channel irc``
sets it up. Imported at every start, so it imports nothing of the channel itself:
:func:`create` does, when a server is set. No package beyond the standard library."""

from __future__ import annotations

from channels.irc.settings import IrcSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question
from gateway.core.channel import Channel, ChannelContext


def create(section: IrcSettings, context: ChannelContext) -> Channel:
    from channels.irc.adapter import IrcChannel  # noqa: PLC0415 - only when on

    return IrcChannel(section, context)


async def greet(section: IrcSettings, to: str, text: str) -> str:
    from channels.irc.greet import greet  # noqa: PLC0415 - only when asked

    return await greet(section, to, text)


PLUGIN = ChannelPlugin(
    name="irc",
    title="IRC",
    settings=IrcSettings,
    create=create,
    onboarding=Onboarding(
        questions=(
            Question("server", "IRC server", default="irc.libera.chat"),
            Question("nick", "The bot's nick", default="switchboard"),
            Question("password", "The bot's account password (empty: none)", secret=True),
            Question("channels", "Channels to join (#one,#two; empty: none)"),
            Question("allow_from", "Your nick, or your nick!user@host mask"),
        ),
        greet=greet,
    ),
)
