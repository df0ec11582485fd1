"""The Slack channel as the gateway knows it (:mod:`gateway.config.plugins`): its section,
``[slack]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard --channel
slack`` sets it up (Socket Mode). Imported at every start, so it imports no SDK:
:func:`create` loads slack-bolt, when a credential is set."""

from __future__ import annotations

from channels.slack.settings import SlackSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question, pair_to_own
from gateway.core.channel import Channel, ChannelContext


def create(section: SlackSettings, context: ChannelContext) -> Channel:
    from channels.slack.adapter import SlackChannel  # noqa: PLC0415 - the SDK when on

    return SlackChannel(section, context)


async def greet(section: SlackSettings, to: str, text: str) -> str:
    from channels.slack.probe import greet  # noqa: PLC0415 - the SDK when asked

    return await greet(section, to, text)


PLUGIN = ChannelPlugin(
    name="slack",
    title="Slack",
    settings=SlackSettings,
    create=create,
    onboarding=Onboarding(
        questions=(
            Question("bot_token", "The Bot User OAuth Token (xoxb-...)", secret=True),
            Question("app_token", "The App-Level Token for Socket Mode (xapp-...)", secret=True),
            Question(
                "allow_from",
                "Your member id, to be its owner (profile > Copy member ID; empty: pair later)",
            ),
        ),
        greet=greet,
        next_step=pair_to_own("DM your app"),
    ),
    loggers=("slack_bolt",),
    token_patterns=(
        r"xox[abpres]-[A-Za-z0-9\-]{10,}",  # bot and user tokens
        r"xapp-[A-Za-z0-9\-]{10,}",  # app-level tokens
    ),
)
