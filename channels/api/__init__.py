"""Other programs talk to the agent over HTTP (``[api]``, ``/v1``): the OpenAI-compatible
endpoints and the task API. docs/connect.md."""

from __future__ import annotations

from channels.api.channel import NAME, PREFIX, ApiChannel

__all__ = ["NAME", "PREFIX", "ApiChannel"]
