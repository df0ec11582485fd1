"""Scheduled jobs, persisted so they survive restarts (background tasks: :mod:`gateway.store.tasks`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from gateway.core.messages import ChatRef
from gateway.core.schedule_spec import ScheduleSpec
from gateway.core.turns import TaskTypeName, task_type_name
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection

Clock = Callable[[], float]

_JOB_COLUMNS = (
    "id, spec, prompt, message, channel, chat_id, thread_id, owner, task_type, state, next_run,"
    " last_run, runs, created_at, agent, authorised_by, tainted"
)


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


# firing: fired, its turn not committed; paused: kept, not run until resumed (the owner's
# control center, `switchboard cron pause`)
JobState = Literal["active", "paused", "firing", "done", "removed"]


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    spec: ScheduleSpec
    prompt: str | None
    message: str | None
    chat: ChatRef
    owner: dict[str, Any]  # the creator: channel, sender_id, sender_name, role, chat_type
    task_type: TaskTypeName = "general"
    state: JobState = "active"
    next_run: datetime | None = None
    last_run: datetime | None = None
    runs: int = 0
    agent: str = "main"
    # The creator's own words and whether their turn had read outside content: a job's turn
    # is authorised by these, never by the prompt the model wrote for it.
    authorised_by: tuple[str, ...] = ()
    tainted: bool = False

    @property
    def owner_key(self) -> str:
        return f"{self.owner.get('channel')}:{self.owner.get('sender_id')}"


def _job(row: tuple[Any, ...]) -> Job:
    (
        job_id,
        spec,
        prompt,
        message,
        channel,
        chat_id,
        thread_id,
        owner,
        task_type,
        state,
        next_run,
        last_run,
        runs,
        _,
        agent,
        authorised_by,
        tainted,
    ) = row
    return Job(
        id=job_id,
        spec=ScheduleSpec.from_dict(json.loads(spec)),
        prompt=prompt,
        message=message,
        chat=ChatRef(channel, chat_id, thread_id),
        owner=json.loads(owner),
        task_type=task_type_name(task_type),
        state=state,
        next_run=_dt(next_run),
        last_run=_dt(last_run),
        runs=int(runs),
        agent=agent,
        authorised_by=tuple(json.loads(authorised_by)),
        tainted=bool(tainted),
    )


class Jobs:
    def __init__(self, db: Database, *, clock: Clock = time.time) -> None:
        self._db = db
        self._clock = clock

    async def add(self, job: Job) -> None:
        await self._db.run(
            lambda conn: conn.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, NULL, 0, ?, ?, ?, ?)",
                (
                    job.id,
                    json.dumps(job.spec.to_dict()),
                    job.prompt,
                    job.message,
                    job.chat.channel,
                    job.chat.chat_id,
                    job.chat.thread_id,
                    json.dumps(job.owner),
                    job.task_type,
                    _ts(job.next_run),
                    self._clock(),
                    job.agent,
                    json.dumps(list(job.authorised_by)),
                    int(job.tainted),
                ),
            )
        )

    async def active(self) -> list[Job]:
        def query(conn: Connection) -> list[Job]:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE state = 'active' ORDER BY next_run"
            )
            return [_job(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def listing(self) -> list[Job]:
        """Every job still to run: active and paused ones, soonest first."""

        def query(conn: Connection) -> list[Job]:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE state IN ('active', 'paused')"
                " ORDER BY next_run, id"
            )
            return [_job(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def get(self, job_id: str) -> Job | None:
        def query(conn: Connection) -> Job | None:
            row = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
            return None if row is None else _job(row)

        return await self._db.run(query, durable=False)

    async def firing(self) -> list[Job]:
        """One-shot jobs that fired but whose turn never committed (a crash or restart)."""

        def query(conn: Connection) -> list[Job]:
            rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE state = 'firing'")
            return [_job(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def record_run(
        self, job_id: str, ran_at: datetime, next_run: datetime | None, *, count: bool = True
    ) -> None:
        """A run (or, with ``count=False``, a reschedule): the next time, or, when there is
        none (one-shot jobs), 'firing' until its turn commits (:meth:`finish_statement`)."""
        await self._db.run(
            lambda conn: conn.execute(
                "UPDATE jobs SET last_run = ?, runs = runs + ?, next_run = ?,"
                " state = CASE WHEN ? IS NULL THEN 'firing' ELSE state END WHERE id = ?",
                (_ts(ran_at), 1 if count else 0, _ts(next_run), _ts(next_run), job_id),
            )
        )

    def finish_statement(self, conn: Connection, job_id: str) -> None:
        """Part of the turn's commit: a fired one-shot job is done."""
        conn.execute("UPDATE jobs SET state = 'done' WHERE id = ? AND state = 'firing'", (job_id,))

    async def remove(self, job_id: str) -> bool:
        def update(conn: Connection) -> bool:
            cursor = conn.execute(
                "UPDATE jobs SET state = 'removed' WHERE id = ? AND state IN ('active', 'paused')",
                (job_id,),
            )
            return cursor.rowcount > 0

        return await self._db.run(update)

    async def pause(self, job_id: str) -> bool:
        """An active job is kept but not run; whether it was active."""
        return await self._move(job_id, "active", "paused")

    async def resume(self, job_id: str) -> bool:
        """A paused job runs again from its next time; whether it was paused."""
        return await self._move(job_id, "paused", "active")

    async def _move(self, job_id: str, before: JobState, after: JobState) -> bool:
        def update(conn: Connection) -> bool:
            cursor = conn.execute(
                "UPDATE jobs SET state = ? WHERE id = ? AND state = ?", (after, job_id, before)
            )
            return cursor.rowcount > 0

        return await self._db.run(update)

    async def run_at(self, job_id: str, when: datetime) -> bool:
        """An active job is due at ``when`` (run now), its schedule going on after that;
        whether it was active."""

        def update(conn: Connection) -> bool:
            cursor = conn.execute(
                "UPDATE jobs SET next_run = ? WHERE id = ? AND state = 'active'",
                (_ts(when), job_id),
            )
            return cursor.rowcount > 0

        return await self._db.run(update)

    async def prune(self, before: float) -> int:
        """Forget done and removed jobs whose last run (or creation) was before ``before``.
        Active jobs and fired one-shots still waiting for their turn stay."""
        return await delete_batched(
            self._db,
            "jobs",
            "state IN ('done', 'removed') AND COALESCE(last_run, created_at) < ?",
            [before],
        )
