"""Slack channel (slack-bolt async): Socket Mode or the HTTP Events API. See docs/channels.md.

Modules: ``adapter`` (lifecycle, intake that acknowledges only journaled events),
``convert`` (pure event → InboundMessage), ``media`` (inbound files), ``render`` (markdown →
mrkdwn, splitting), ``sender`` (delivery that never blindly repeats a call that may have
succeeded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.slack.adapter import SlackChannel

if TYPE_CHECKING:
    from gateway.config.settings import Settings

__all__ = ["SlackChannel", "create"]


def create(settings: Settings) -> SlackChannel:
    """The factory named in :data:`channels.REGISTRY`."""
    return SlackChannel(settings)
