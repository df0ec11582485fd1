"""What the web server would serve, decided without loading it (aiohttp, the pages): the
gateway checks its port before any channel connects, and that check must not delay the
channels by the server's import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.core.webhost import ServesPrograms, ServesWeb, ServesWebhooks

if TYPE_CHECKING:
    from gateway.web.view import GatewayView


def web_channels(gateway: GatewayView) -> list[ServesWeb]:
    channels: list[object] = list(gateway.channels.values())
    return [c for c in channels if isinstance(c, ServesWeb)]


def webhook_channels(gateway: GatewayView) -> list[ServesWebhooks]:
    """Channels that take a platform's webhooks on this server (public, self-authenticated)."""
    channels: list[object] = list(gateway.channels.values())
    return [c for c in channels if isinstance(c, ServesWebhooks)]


def program_channels(gateway: GatewayView) -> list[ServesPrograms]:
    """Channels other programs call (webhooks, the API; docs/connect.md)."""
    channels: list[object] = list(gateway.channels.values())
    return [c for c in channels if isinstance(c, ServesPrograms)]


def serves_something(gateway: GatewayView) -> bool:
    """Whether the web server has anything to serve: the web chat, a platform's webhooks,
    other programs' endpoints."""
    return bool(web_channels(gateway) or webhook_channels(gateway) or program_channels(gateway))
