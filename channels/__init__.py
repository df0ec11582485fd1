"""Channel adapters: one per platform. Each depends on :mod:`gateway` types and its SDK only.

:data:`REGISTRY` maps a channel name to the factory that builds it; the module is imported
only when that channel is enabled, so unused SDKs cost nothing at start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gateway.config.settings import Settings
    from gateway.core.channel import Channel


class ChannelFactory(Protocol):
    def __call__(self, settings: Settings) -> Channel: ...


REGISTRY: dict[str, str] = {
    "telegram": "channels.telegram:create",
    "discord": "channels.discord:create",
    "slack": "channels.slack:create",
    "whatsapp": "channels.whatsapp:create",
    "matrix": "channels.matrix:create",
    "email": "channels.email:create",
}


def enabled_channels(settings: Settings) -> list[str]:
    names = []
    for name in REGISTRY:
        section = getattr(settings, name)
        if section.enabled:
            names.append(name)
    return names


def build_channels(settings: Settings) -> list[Channel]:
    """Construct every enabled channel, importing only their modules."""
    channels = []
    for name in enabled_channels(settings):
        module_name, _, attr = REGISTRY[name].partition(":")
        factory: ChannelFactory = getattr(importlib.import_module(module_name), attr)
        channels.append(factory(settings))
    return channels
