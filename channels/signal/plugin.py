"""The Signal channel as the gateway knows it (:mod:`gateway.config.plugins`): its section,
``[signal]`` (:mod:`.settings`), how to build it, and how ``switchboard onboard --channel
signal`` sets it up. Imported at every start, so it imports nothing of the channel itself:
:func:`create` does, when ``rpc_url`` is set. signal-cli is the user's to install and run."""

from __future__ import annotations

from pathlib import Path

from channels.signal.settings import SignalSettings
from gateway.config.plugins import ChannelPlugin, Onboarding, Question
from gateway.core.channel import Channel, ChannelContext


def create(section: SignalSettings, context: ChannelContext) -> Channel:
    from channels.signal.adapter import SignalChannel  # noqa: PLC0415 - only when on

    return SignalChannel(section, context)


async def greet(section: SignalSettings, to: str, text: str) -> str:
    from channels.signal.greet import greet  # noqa: PLC0415 - only when asked

    return await greet(section, to, text)


def next_step(section: SignalSettings, env_file: Path) -> str:
    return (
        f"keep `signal-cli -a {section.account} daemon --http <host:port> "
        "--receive-mode on-connection` running (a service of its own) before `switchboard run`"
    )


PLUGIN = ChannelPlugin(
    name="signal",
    title="Signal",
    settings=SignalSettings,
    create=create,
    onboarding=Onboarding(
        questions=(
            Question(
                "rpc_url",
                "signal-cli's JSON-RPC endpoint (`signal-cli daemon --http`)",
                default="http://127.0.0.1:8080",
            ),
            Question("account", "The bot's Signal number (+4915100000000)"),
            Question("allow_from", "Your own Signal number (+4915112345678)"),
        ),
        greet=greet,
        next_step=next_step,
    ),
)
