"""Work that starts without a person writing: heartbeat check-ins and scheduled jobs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from gateway.core.messages import ChatRef
from gateway.core.principal import Principal
from gateway.core.turns import TaskTypeName, TurnKind


@dataclass(frozen=True, slots=True)
class ScheduledRun:
    """One scheduled turn for the dispatcher: a prompt for the agent, or a fixed message."""

    kind: TurnKind  # HEARTBEAT or CRON
    session_key: str
    chat: ChatRef  # where anything worth saying goes
    principal: Principal
    prompt: str | None = None
    message: str | None = None  # sent as is, no model call
    task_type: TaskTypeName = "general"
    history_limit: int | None = None
    # Whose words authorise side effects (never the prompt the model wrote for a job), and
    # whether the turn that set this up had read outside content.
    authorising_texts: tuple[str, ...] = ()
    tainted: bool = False
    job_id: str | None = None  # a one-shot job is done when this run's turn commits
    # The conversation that records what it says, when not its chat's own: the person's one
    # conversation across channels (qualified with the agent).
    conversation: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event, compare=False)
