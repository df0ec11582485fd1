"""Task types (Pegasus): each gives a turn its own tool set and a short prompt block.

``general`` may use everything policy allows; ``explore`` only tools that read; ``plan``
reads too, and answers with a plan instead of doing the work. Background tasks and scheduled
jobs name their type. Which tools fit which kind of turn is decided here as well: the
``notify`` tool belongs to background tasks, ``message``, ``spawn`` and ``cron`` to turns
with a person in the chat.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.tools.base import Effect, Tool
from gateway.core.turns import TaskTypeName, TurnKind


@dataclass(frozen=True, slots=True)
class TaskType:
    name: TaskTypeName
    read_only: bool
    prompt: str


TASK_TYPES: dict[TaskTypeName, TaskType] = {
    "general": TaskType("general", read_only=False, prompt=""),
    "explore": TaskType(
        "explore",
        read_only=True,
        prompt="Task type: explore. Investigate with read-only tools and report what you found; change nothing.",
    ),
    "plan": TaskType(
        "plan",
        read_only=True,
        prompt="Task type: plan. Read what you need, then answer with a numbered plan of concrete steps. Do not carry the steps out.",
    ),
}

CHAT_ONLY = frozenset({"message", "spawn", "cron"})
BACKGROUND_ONLY = frozenset({"notify"})


def task_type(name: TaskTypeName) -> TaskType:
    return TASK_TYPES[name]


def fits(tool: Tool, *, kind: TurnKind, task: TaskType) -> bool:
    """Whether ``tool`` belongs in a turn of this kind (chat, heartbeat, cron, subagent) and type."""
    if task.read_only and tool.effect is not Effect.READ and tool.name not in BACKGROUND_ONLY:
        return False  # (progress notes to the user are not a side effect on the world)
    if kind is TurnKind.SUBAGENT:
        return tool.name not in CHAT_ONLY
    if tool.name in BACKGROUND_ONLY:
        return False
    return not (kind is not TurnKind.CHAT and tool.name in ("spawn", "cron"))
