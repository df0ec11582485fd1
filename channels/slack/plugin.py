"""The Slack channel as the gateway knows it (:mod:`gateway.config.plugins`): its section,
``[slack]`` (:mod:`.settings`), and how to build it. Imported at every start, so it imports
no SDK: :func:`create` loads slack-bolt, when a credential is set."""

from __future__ import annotations

from channels.slack.settings import SlackSettings
from gateway.config.plugins import ChannelPlugin
from gateway.core.channel import Channel, ChannelContext


def create(section: SlackSettings, context: ChannelContext) -> Channel:
    from channels.slack.adapter import SlackChannel  # noqa: PLC0415 - the SDK when on

    return SlackChannel(section, context)


PLUGIN = ChannelPlugin(
    name="slack",
    title="Slack",
    settings=SlackSettings,
    create=create,
    loggers=("slack_bolt",),
    token_patterns=(
        r"xox[abpres]-[A-Za-z0-9\-]{10,}",  # bot and user tokens
        r"xapp-[A-Za-z0-9\-]{10,}",  # app-level tokens
    ),
)
