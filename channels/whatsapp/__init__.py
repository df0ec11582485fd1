"""WhatsApp channel (Meta's Cloud API), see docs/channels.md#whatsapp.

Modules: ``adapter`` (lifecycle and wiring), ``webhook`` (Meta's handshake and signed POSTs
on the gateway's web server), ``convert`` (pure webhook body → messages, reports,
reactions), ``media`` (inbound files), ``render`` (markdown → WhatsApp formatting,
splitting), ``sender`` (the 24-hour window, templates, parts), ``errors`` (Meta's codes as
the outbox's error types), ``graph`` (a thin Graph API client), ``probe`` (``doctor``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.whatsapp.adapter import WhatsAppChannel

if TYPE_CHECKING:
    from gateway.config.settings import Settings

__all__ = ["WhatsAppChannel", "create"]


def create(settings: Settings) -> WhatsAppChannel:
    return WhatsAppChannel(settings)
