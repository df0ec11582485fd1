"""The pieces the composition root (:class:`gateway.runtime.app.Gateway`) needs built from
settings alone: the channels ``switchboard run`` starts, and the one send that bypasses the
outbox."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.config.settings import Settings
from gateway.core.channel import Channel
from gateway.core.messages import OutboundMessage


def configured_channels(settings: Settings) -> list[Channel]:
    """Every enabled platform (only their SDKs are imported), the web chat when the web
    server is on, and the terminal, which also serves ``switchboard chat`` windows on the
    data directory's socket."""
    from channels import build_channels  # noqa: PLC0415 - the enabled SDKs only
    from channels.terminal import TerminalChannel, socket_path  # noqa: PLC0415

    channels = build_channels(settings)
    if settings.web.enabled:
        from channels.webchat import create as create_webchat  # noqa: PLC0415

        channels.append(create_webchat(settings))
    terminal = TerminalChannel(
        agent_name=settings.agent.name,
        model=settings.llm.model,
        socket=socket_path(settings.data_dir),
    )
    return [*channels, terminal]


class DirectSend:
    """A send past the outbox, for the one notice that cannot wait in it: the disk is full,
    and the outbox is in the full store."""

    def __init__(self, channels: Mapping[str, Channel]) -> None:
        self._channels = channels

    async def __call__(self, message: OutboundMessage) -> None:
        channel = self._channels.get(message.channel)
        if channel is not None:
            await channel.send(message)
