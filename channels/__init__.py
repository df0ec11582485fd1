"""Channel adapters: one folder per platform, each a plug-in (``<folder>/plugin.py``,
:mod:`gateway.config.plugins`). Each depends on :mod:`gateway` types and its SDK only.

A channel's module and SDK are imported only when that channel is enabled, so unused SDKs
cost nothing at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config.plugins import channel_plugins

if TYPE_CHECKING:
    from gateway.config.settings import Settings
    from gateway.core.channel import Channel


def enabled_channels(settings: Settings) -> list[str]:
    """The registered channels whose section turns them on, in the registry's order."""
    return [name for name, section in settings.channel_sections().items() if section.enabled]


def build_channels(settings: Settings) -> list[Channel]:
    """Construct every enabled channel, importing only their modules."""
    plugins, context = channel_plugins(), settings.channel_context()
    sections = settings.channel_sections()
    return [plugins[name].create(sections[name], context) for name in enabled_channels(settings)]
