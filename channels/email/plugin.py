"""The email channel as the gateway knows it (:mod:`gateway.config.plugins`): its section,
``[email]`` (:mod:`.settings`), and how to build the inbox channel. Imported at every
start, so it imports neither mail library: :func:`create` does."""

from __future__ import annotations

from channels.email.settings import EmailSettings
from gateway.config.plugins import ChannelPlugin
from gateway.core.channel import Channel, ChannelContext
from gateway.core.errors import ConfigError


def create(section: EmailSettings, context: ChannelContext) -> Channel:
    if not section.can_send:
        raise ConfigError(
            "the email inbox is on (email.imap_host) but replies cannot be sent: "
            "set email.smtp_host and email.from_address",
            field="email.smtp_host",
        )
    from channels.email.adapter import EmailChannel  # noqa: PLC0415 - the mail libraries

    return EmailChannel(section, context)


PLUGIN = ChannelPlugin(name="email", title="email", settings=EmailSettings, create=create)
