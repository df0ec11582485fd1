"""The Telegram channel as the gateway knows it (:mod:`gateway.config.plugins`): its
section, ``[telegram]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard
--channel telegram`` sets it up. Imported at every start, so it imports no SDK:
:func:`create` does, when the token is set."""

from __future__ import annotations

from pathlib import Path

from channels.telegram.settings import TelegramSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question
from gateway.core.channel import Channel, ChannelContext


def create(section: TelegramSettings, context: ChannelContext) -> Channel:
    from channels.telegram.adapter import TelegramChannel  # noqa: PLC0415 - the SDK when on

    return TelegramChannel(section, context)


async def greet(section: TelegramSettings, to: str, text: str) -> str:
    from channels.telegram.probe import greet  # noqa: PLC0415 - the SDK when asked

    return await greet(section, to, text)


def next_step(section: TelegramSettings, env_file: Path) -> str | None:
    if section.owners:
        return None
    return (
        "start `switchboard run`, write to your bot from your Telegram, and approve the "
        "pairing code it answers with `switchboard pairing approve CODE --owner` (you are "
        "its owner from then on)"
    )


PLUGIN = ChannelPlugin(
    name="telegram",
    title="Telegram",
    settings=TelegramSettings,
    create=create,
    onboarding=Onboarding(
        questions=(Question("token", "The bot's token from @BotFather", secret=True),),
        greet=greet,
        next_step=next_step,
    ),
    loggers=("telegram.ext",),
    token_patterns=(
        r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b",  # a bot token
        r"(?<=/bot)\d{6,12}:[A-Za-z0-9_\-]{30,}",  # in a Bot API URL
    ),
)
