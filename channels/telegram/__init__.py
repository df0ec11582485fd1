"""Telegram channel (python-telegram-bot 22): long polling or webhook, see docs/channels.md.

Modules: ``adapter`` (lifecycle and wiring), ``polling`` / ``webhook`` (intake that
acknowledges only journaled updates), ``convert`` (pure Update → InboundMessage),
``media`` (inbound files), ``render`` (markdown → entities, splitting),
``sender`` (paced, typed-error delivery), ``buttons`` (approval requests with an inline
keyboard, and acknowledging a press), ``state`` (command registry file, token lock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.telegram.adapter import TelegramChannel

if TYPE_CHECKING:
    from gateway.config.settings import Settings

__all__ = ["TelegramChannel", "create"]


def create(settings: Settings) -> TelegramChannel:
    return TelegramChannel(settings)
