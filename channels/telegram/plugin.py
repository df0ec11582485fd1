"""The Telegram channel as the gateway knows it (:mod:`gateway.config.plugins`): its
section, ``[telegram]`` (:mod:`.settings`), and how to build it. Imported at every start, so
it imports no SDK: :func:`create` does, when the token is set."""

from __future__ import annotations

from channels.telegram.settings import TelegramSettings
from gateway.config.plugins import ChannelPlugin
from gateway.core.channel import Channel, ChannelContext


def create(section: TelegramSettings, context: ChannelContext) -> Channel:
    from channels.telegram.adapter import TelegramChannel  # noqa: PLC0415 - the SDK when on

    return TelegramChannel(section, context)


PLUGIN = ChannelPlugin(
    name="telegram",
    title="Telegram",
    settings=TelegramSettings,
    create=create,
    loggers=("telegram.ext",),
    token_patterns=(
        r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b",  # a bot token
        r"(?<=/bot)\d{6,12}:[A-Za-z0-9_\-]{30,}",  # in a Bot API URL
    ),
)
