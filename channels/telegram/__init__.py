"""Telegram channel (python-telegram-bot 22): long polling or webhook, see docs/channels.md.

Modules: ``plugin`` (``[telegram]`` and how the gateway builds the channel; no SDK),
``adapter`` (lifecycle and wiring), ``polling`` / ``webhook`` (intake that
acknowledges only journaled updates), ``convert`` (pure Update → InboundMessage),
``media`` (inbound files), ``render`` (markdown → entities, splitting),
``sender`` (paced, typed-error delivery), ``buttons`` (approval requests with an inline
keyboard, and acknowledging a press), ``state`` (command registry file, token lock).
"""
