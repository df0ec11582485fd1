"""The Telegram channel as the gateway knows it (:mod:`gateway.config.plugins`): its
section, ``[telegram]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard
--channel telegram`` sets it up. Imported at every start, so it imports no SDK:
:func:`create` does, when the token is set."""

from __future__ import annotations

from channels.telegram.settings import TelegramSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question, pair_to_own
from gateway.core.channel import Channel, ChannelContext


def create(section: TelegramSettings, context: ChannelContext) -> Channel:
    from channels.telegram.adapter import TelegramChannel  # noqa: PLC0415 - the SDK when on

    return TelegramChannel(section, context)


async def greet(section: TelegramSettings, to: str, text: str) -> str:
    from channels.telegram.probe import greet  # noqa: PLC0415 - the SDK when asked

    return await greet(section, to, text)


PLUGIN = ChannelPlugin(
    name="telegram",
    title="Telegram",
    settings=TelegramSettings,
    create=create,
    onboarding=Onboarding(
        questions=(Question("token", "The bot's token from @BotFather", secret=True),),
        greet=greet,
        next_step=pair_to_own("write to your bot from your Telegram"),
    ),
    loggers=("telegram.ext",),
    token_patterns=(
        r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b",  # a bot token
        r"(?<=/bot)\d{6,12}:[A-Za-z0-9_\-]{30,}",  # in a Bot API URL
    ),
)
