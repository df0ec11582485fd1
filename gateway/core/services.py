"""Gateway services some agent tools need (scheduling, background tasks), as small protocols.

The gateway implements them and hands them to each agent it builds; tools reach them
through ``ToolContext.services``. A tool whose service is missing says so plainly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from gateway.core.messages import ChatRef, ChatType
from gateway.core.principal import Principal
from gateway.core.turns import TaskTypeName, TurnKind


@dataclass(frozen=True, slots=True)
class JobInfo:
    id: str
    description: str  # when it runs, in words
    next_run: datetime | None
    what: str  # the prompt or the fixed message
    # its next run falls in its owner's quiet hours: it waits until then (their own zone)
    waits_until: datetime | None = None
    paused: bool = False  # kept, not run until resumed


@dataclass(frozen=True, slots=True)
class ScheduledItem:
    """What the scheduler shows outside (the status page, ``switchboard cron list``)."""

    id: str
    kind: TurnKind  # HEARTBEAT or CRON
    description: str
    next_run: datetime | None
    target: str | None = None  # "channel:chat" the result goes to


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
        task_type: TaskTypeName,
        agent: str = "main",
        user_texts: tuple[str, ...] = (),
        tainted: bool = False,
    ) -> JobInfo: ...

    async def list_jobs(self, principal: Principal) -> list[JobInfo]:
        """Their jobs still to run, paused ones too (the owner: everyone's)."""

    async def remove_job(self, job_id: str, principal: Principal) -> bool: ...

    async def pause_job(self, job_id: str, principal: Principal) -> bool: ...

    async def resume_job(self, job_id: str, principal: Principal) -> bool: ...


class TaskService(Protocol):
    async def spawn(
        self,
        *,
        prompt: str,
        task_type: TaskTypeName,
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


class TimeZoneService(Protocol):
    """Each person's own time zone (``[people]`` in config, or set by asking)."""

    async def zone_of(self, person: str) -> str:
        """The IANA zone of ``person`` (``channel:sender id``): theirs, else the default."""
        ...

    def fixed_zone(self, person: str) -> str | None:
        """The zone config gives ``person`` (it cannot be changed by asking), if any."""
        ...

    async def propose_zone(self, person: str, zone: str, turn_id: str) -> None:
        """Remember that ``zone`` was put to ``person`` for confirmation in ``turn_id``."""
        ...

    async def confirm_zone(self, person: str, zone: str, turn_id: str) -> bool:
        """Store ``zone`` as ``person``'s if it was put to them in an earlier turn (their
        answer is this turn) not long ago; ``False`` when it was not."""
        ...


@dataclass(frozen=True, slots=True)
class KnownChat:
    """A chat the bot is in, by name."""

    channel: str
    chat_id: str
    name: str
    kind: ChatType


class ChatService(Protocol):
    """The chats the bot knows (the ``chats`` tool), and where each person has sent to."""

    async def known_chats(self, channel: str | None = None) -> tuple[list[KnownChat], list[str]]:
        """The chats of every configured channel (or of ``channel``), and notes about channels
        that could not be asked."""
        ...

    async def has_sent_to(self, person: str, chat: ChatRef) -> bool: ...

    async def propose_send(self, person: str, chat: ChatRef, turn_id: str) -> None: ...

    async def confirmed_send(self, person: str, chat: ChatRef, turn_id: str) -> bool:
        """Whether a first send to ``chat`` was put to ``person`` in an earlier turn."""
        ...

    async def sent_to(self, person: str, chat: ChatRef) -> None: ...


@dataclass(slots=True)
class Services:
    jobs: JobService | None = None
    tasks: TaskService | None = None
    agents: AgentDirectory | None = None
    zones: TimeZoneService | None = None
    chats: ChatService | None = None
