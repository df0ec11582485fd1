"""What kind of turn is running: a person's chat, or work nobody is waiting on."""

from __future__ import annotations

import enum


class TurnKind(enum.StrEnum):
    """Why a turn runs (the journal's ``turns.kind``)."""

    CHAT = "chat"  # a person wrote; the turn must end with a visible answer
    HEARTBEAT = "heartbeat"  # a scheduled check-in (HEARTBEAT.md); may end silently
    CRON = "cron"  # a scheduled job; may end silently
    SUBAGENT = "subagent"  # a background task spawned by a chat turn
    SYSTEM = "system"  # a background task's result, delivered without a model call

    @property
    def unattended(self) -> bool:
        """Nobody waits for this turn (design document 004's "autopilot mode"): no
        clarifying questions, and silence is a valid outcome."""
        return self is not TurnKind.CHAT

    @property
    def scheduled(self) -> bool:
        """Started by the scheduler (a heartbeat or a job), not by a message."""
        return self in (TurnKind.HEARTBEAT, TurnKind.CRON)
