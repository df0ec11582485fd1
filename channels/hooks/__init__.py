"""Signed inbound webhooks (``[hooks.<name>]``, ``POST /hooks/<name>``): docs/connect.md."""

from __future__ import annotations

from channels.hooks.channel import NAME, PREFIX, HookChannel

__all__ = ["NAME", "PREFIX", "HookChannel"]
