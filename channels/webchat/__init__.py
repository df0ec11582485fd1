"""The web chat: a chat channel served by the gateway's own web server (gateway/web).

Enabled by ``web.enabled`` (the default); ``switchboard run`` adds it to its channels and
the gateway then starts the web server. See docs/channels.md#web-chat-and-status-page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.webchat.adapter import NAME, WebChatChannel

if TYPE_CHECKING:
    from gateway.config.settings import Settings

__all__ = ["NAME", "WebChatChannel", "create"]


def create(settings: Settings) -> WebChatChannel:
    """Build the web chat channel from settings."""
    return WebChatChannel(
        data_dir=settings.data_dir,
        workspace_dir=settings.workspace_dir,
        agent_name=settings.agent.name,
        max_attachment_bytes=settings.web.max_attachment_bytes,
        max_files=settings.web.max_files_per_message,
        hears=settings.speech().enabled,
    )
