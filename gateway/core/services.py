"""Gateway services some agent tools need (scheduling, background tasks), as small protocols.

The gateway implements them and hands them to each agent it builds; tools reach them
through ``ToolContext.services``. A tool whose service is missing says so plainly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from gateway.core.messages import ChatRef
from gateway.core.principal import Principal


@dataclass(frozen=True, slots=True)
class JobInfo:
    id: str
    description: str  # when it runs, in words
    next_run: datetime | None
    what: str  # the prompt or the fixed message


class JobService(Protocol):
    async def add_job(
        self,
        *,
        schedule: str,
        timezone: str | None,
        prompt: str | None,
        message: str | None,
        chat: ChatRef,
        principal: Principal,
        task_type: str,
        agent: str = "main",
        user_texts: tuple[str, ...] = (),
        tainted: bool = False,
    ) -> JobInfo: ...

    async def list_jobs(self, principal: Principal) -> list[JobInfo]: ...

    async def remove_job(self, job_id: str, principal: Principal) -> bool: ...


class TaskService(Protocol):
    async def spawn(
        self,
        *,
        prompt: str,
        task_type: str,
        chat: ChatRef,
        principal: Principal,
        user_texts: tuple[str, ...],
        tainted: bool,
        agent: str = "main",
        after_turn: str | None = None,
    ) -> str:
        """Record a background task and start it once ``after_turn`` (the turn that asked
        for it) is committed; returns its id."""
        ...


class AgentDirectory(Protocol):
    """The other agents on this gateway, and who may message whom."""

    def may_message(self, sender: str, target: str) -> bool: ...

    def reachable(self, sender: str) -> tuple[str, ...]: ...

    async def open_conversation(
        self,
        *,
        sender: str,
        origin: ChatRef,
        principal: Principal,
        user_texts: tuple[str, ...] = (),
        tainted: bool = False,
    ) -> str: ...

    async def taint(self, conversation_id: str) -> None: ...


@dataclass(slots=True)
class Services:
    jobs: JobService | None = None
    tasks: TaskService | None = None
    agents: AgentDirectory | None = None
