"""What the web server reads of the running gateway, and the one thing it may change.

The web layer depends on this small interface, not on the
:class:`~gateway.runtime.app.Gateway` class that implements it, so the runtime can start
the server without the server reaching back into the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gateway.config.settings import Settings
from gateway.core.channel import Channel
from gateway.core.scheduling import ScheduledItem
from gateway.store import PairingRequest, Store


@dataclass(frozen=True, slots=True)
class WorkInProgress:
    running_turns: int  # turns running now
    queued_messages: int  # messages behind a running turn of their chat


@dataclass(frozen=True, slots=True)
class ModelState:
    """One configured model and how it fares (fallback models: ``llm.fallbacks``)."""

    name: str  # "gpt-4o (openai)"
    label: str  # "openai gpt-4o at https://api.openai.com/v1": the trace's and log's name
    settings: tuple[str, ...]  # where it is configured: "llm", "llm.fallbacks[0]", "agents.x"
    answered_last: bool  # the gateway's latest model answer came from this one
    last_answer_at: float | None  # Unix time of its latest answer since the start
    cooling_until: float | None  # Unix time its cooldown ends; None: not cooling down
    last_error: str | None  # why it failed, while it cools down


@dataclass(frozen=True, slots=True)
class CapSpend:
    """How much of one money cap its current day or month has spent."""

    key: str  # the setting: "limits.gateway_daily_usd", "agents.work.monthly_usd"
    spent_usd: float
    limit_usd: float
    resets_at: float  # Unix time the next day or month begins


class GatewayView(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def store(self) -> Store: ...

    @property
    def channels(self) -> Mapping[str, Channel]: ...

    def work_in_progress(self) -> WorkInProgress: ...

    def model_states(self) -> list[ModelState]:
        """Every configured model, primary first: which answered last, which cool down."""

    def degraded(self) -> str | None:
        """Why this node is paused, riding out a problem it recovers from by itself (a
        cluster node that lost its database); ``None``: it is not."""

    def schedule(self) -> list[ScheduledItem] | None:
        """Heartbeat and scheduled jobs, or None when this gateway runs no scheduler."""

    async def spending(self) -> list[CapSpend]:
        """The money caps that are set (the gateway's, background work's, each agent's,
        and those ``[people]`` set), with what each has spent."""

    async def decide_pairing(self, code: str, *, approve: bool, by: str) -> PairingRequest | None:
        """Approve or deny a pending pairing code; None when no such request is pending."""
