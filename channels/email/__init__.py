"""The email channel: an IMAP inbox the bot answers by SMTP (see adapter.py).

Sending on its own (the ``send_email`` tool) needs only the SMTP settings; this channel is
on when the IMAP settings are set, and then needs SMTP too, to reply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.email.adapter import EmailChannel
from gateway.core.errors import ConfigError

if TYPE_CHECKING:
    from gateway.config.settings import Settings

__all__ = ["EmailChannel", "create"]


def create(settings: Settings) -> EmailChannel:
    email = settings.email
    if not email.can_send:
        raise ConfigError(
            "the email inbox is on (email.imap_host) but replies cannot be sent: "
            "set email.smtp_host and email.from_address",
            field="email.smtp_host",
        )
    return EmailChannel(
        email,
        data_dir=settings.data_dir,
        workspace_dir=settings.workspace_dir,
        sender_name=settings.agent.name,
    )
