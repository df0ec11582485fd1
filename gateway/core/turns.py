"""What kind of turn is running (a person's chat, or work nobody is waiting on), and the
handle of a running turn (what it is doing, how to stop or steer it)."""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

from gateway.core.messages import InboundMessage


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


# What a background task or a scheduled job is asked to do (agent/task_types.py: "general"
# may use what policy allows, "explore" only reads, "plan" reads and answers with a plan).
TaskTypeName = Literal["general", "explore", "plan"]
TASK_TYPE_NAMES: tuple[TaskTypeName, ...] = get_args(TaskTypeName)


def task_type_name(value: object) -> TaskTypeName:
    """``value`` as a task type (a model's or an old row's word), "general" when unknown."""
    for name in TASK_TYPE_NAMES:
        if value == name:
            return name
    return "general"


class TurnStopped(Exception):
    """Raised out of a turn's loop at the first boundary after someone asked it to stop."""


# Takes the messages that arrived for the running turn's chat since it began (each with its
# journal id), so they can join the turn as follow-ups; empty when there are none.
FollowUps = Callable[[], list[tuple[int, InboundMessage]]]


@dataclass(slots=True)
class TurnControl:
    """A running turn's handle, shared by the dispatcher, the turn and the control commands:
    what it is doing now, how to stop it, and how to steer it with follow-ups.

    The turn reports what it does (:meth:`doing`); ``/status`` reads it. ``/stop`` sets
    :attr:`stop_requested`; the turn stops at its next boundary (a model call is cut at
    once) and tells the person what it had already done."""

    turn_id: str
    session_key: str
    started_by: str  # the person whose message started it: Principal.person
    started_at: float = field(default_factory=time.monotonic)
    activity: str = "starting"
    activity_since: float = field(default_factory=time.monotonic)
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    stopped_by: str | None = None
    dropped: int = 0  # queued messages dropped by the stop
    followups: FollowUps | None = None  # None: follow-ups wait for the next turn
    # the model and the window of the running turn, once it knows them (for /status)
    model: str = ""
    context_tokens: int = 0
    context_window: int = 0

    def doing(self, activity: str) -> None:
        if activity != self.activity:
            self.activity, self.activity_since = activity, time.monotonic()

    def stop(self, by: str) -> bool:
        """Ask the turn to stop; whether this was the first ask."""
        if self.stop_requested.is_set():
            return False
        self.stopped_by = by
        self.stop_requested.set()
        return True

    @property
    def stopping(self) -> bool:
        return self.stop_requested.is_set()
