"""Discord channel (discord.py 2.x): DMs, guild channels and threads. See docs/channels.md.

Modules: ``adapter`` (lifecycle and wiring), ``connection`` (the gateway client and its
bounded reconnect policy), ``convert`` (pure Message → InboundMessage), ``media`` (inbound
files), ``render`` (splitting, nonces, mention safety), ``sender`` (delivery, error mapping).

This package is imported only when Discord is enabled (``channels.REGISTRY``), so importing
the SDK here costs nothing otherwise. discord.py imports the stdlib ``audioop`` for voice
support, which we never use; Python 3.11-3.12 warn about that module's removal, and the
warning would only be noise in logs (and an error under ``-W error``).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    import discord  # noqa: F401

from channels.discord.adapter import DiscordChannel  # after the filter above

if TYPE_CHECKING:
    from gateway.config.settings import Settings

__all__ = ["DiscordChannel", "create"]


def create(settings: Settings) -> DiscordChannel:
    """The factory named in :data:`channels.REGISTRY`."""
    return DiscordChannel(settings)
