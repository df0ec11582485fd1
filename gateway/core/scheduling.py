"""What the scheduler shows to the outside (status page, ``switchboard cron list``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.core.turns import TurnKind


@dataclass(frozen=True, slots=True)
class ScheduledItem:
    id: str
    kind: TurnKind  # HEARTBEAT or CRON
    description: str
    next_run: datetime | None
    target: str | None = None  # "channel:chat" the result goes to
