"""Background tasks (``spawn``, ``POST /v1/tasks``) and what happened to each, durably.

A task moves ``queued`` → ``running`` (→ ``awaiting_approval`` → ``running`` …) → ``done``,
``failed`` or ``stopped`` (``interrupted``: a restart cut it where tasks are not resumed, in
a cluster). Its turn id is recorded when it starts, so after a restart the same turn resumes
from its checkpoints (a side effect already made is not made again). Every change of state,
every progress note and the answer are :class:`TaskEvent` rows, numbered per task, so a
client following a task (server-sent events) can pick up where it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from gateway.core.messages import ChatRef
from gateway.core.turns import TaskTypeName, task_type_name
from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import TASKS_TOPIC, Connection

Clock = Callable[[], float]

TaskState = Literal[
    "queued", "running", "awaiting_approval", "done", "failed", "stopped", "interrupted"
]
OPEN_STATES: tuple[TaskState, ...] = ("queued", "running", "awaiting_approval")
FINAL_STATES: tuple[TaskState, ...] = ("done", "failed", "stopped", "interrupted")
EventKind = Literal["state", "note", "answer"]

_OPEN = "('queued', 'running', 'awaiting_approval')"
END, RESULT = "end", "result"  # the keys of a task's last events: recorded once


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    prompt: str
    task_type: TaskTypeName
    chat: ChatRef  # where its notes and result go: the spawning chat, or the task channel
    owner: dict[str, Any]  # the principal it acts for (channel, sender_id, role, ...)
    state: TaskState
    result: str | None = None
    agent: str = "main"
    turn_id: str | None = None  # set when it starts; a restart resumes this turn
    deliver_to: ChatRef | None = None  # a chat that also gets its notes and result (API tasks)
    # The spawning person's own words and whether their turn had read outside content: the
    # task's side effects are authorised by these, never by the prompt the model wrote.
    authorised_by: tuple[str, ...] = ()
    tainted: bool = False
    created_at: float = 0.0
    finished_at: float | None = None

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES


@dataclass(frozen=True, slots=True)
class TaskEvent:
    seq: int  # 1, 2, ... per task
    at: float
    kind: EventKind
    text: str  # the new state, the note, or the answer


def _target(value: str | None) -> ChatRef | None:
    if not value:
        return None
    data = json.loads(value)
    return ChatRef(data["channel"], data["chat_id"], data.get("thread_id"))


def _target_json(chat: ChatRef | None) -> str | None:
    if chat is None:
        return None
    return json.dumps(
        {"channel": chat.channel, "chat_id": chat.chat_id, "thread_id": chat.thread_id}
    )


class Tasks:
    """Background tasks: which wait, run or finished, and what each did."""

    _COLUMNS = (
        "id, prompt, task_type, channel, chat_id, thread_id, owner, state, result, agent,"
        " turn_id, deliver_to, authorised_by, tainted, created_at, finished_at"
    )

    def __init__(self, db: Database, *, clock: Clock = time.time, node: str = "") -> None:
        self._db = db
        self._clock = clock
        self._node = node  # a cluster's node: the tasks it records run here (it owns them)

    @staticmethod
    def _record(row: tuple[Any, ...]) -> TaskRecord:
        (
            task_id,
            prompt,
            task_type,
            channel,
            chat,
            thread,
            owner,
            state,
            result,
            agent,
            turn_id,
            deliver_to,
            authorised_by,
            tainted,
            created_at,
            finished_at,
        ) = row
        return TaskRecord(
            task_id,
            prompt,
            task_type_name(task_type),
            ChatRef(channel, chat, thread),
            json.loads(owner),
            state,
            result,
            agent,
            turn_id,
            _target(deliver_to),
            tuple(json.loads(authorised_by or "[]")),
            bool(tainted),
            float(created_at),
            None if finished_at is None else float(finished_at),
        )

    async def start(self, task: TaskRecord) -> bool:
        """Record a new task as queued (with its first event); ``False`` when a task with
        this id exists already (a submission repeated with the same idempotency key)."""
        now = self._clock()

        def insert(conn: Connection) -> bool:
            row = conn.execute(
                "INSERT INTO tasks (id, prompt, task_type, channel, chat_id, thread_id, owner,"
                " state, created_at, agent, deliver_to, authorised_by, tainted, updated_at,"
                " node) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING RETURNING id",
                (
                    task.id,
                    task.prompt,
                    task.task_type,
                    task.chat.channel,
                    task.chat.chat_id,
                    task.chat.thread_id,
                    json.dumps(task.owner),
                    now,
                    task.agent,
                    _target_json(task.deliver_to),
                    json.dumps(list(task.authorised_by)),
                    int(task.tainted),
                    now,
                    self._node or None,
                ),
            ).fetchone()
            if row is None:
                return False
            _append(conn, task.id, "state", "queued", now)
            return True

        return await self._db.run(insert)

    async def move(self, task_id: str, state: TaskState, *, turn_id: str | None = None) -> bool:
        """An open task changes state (running, awaiting_approval; ``turn_id`` once it
        starts); ``False`` when it is no longer open (stopped meanwhile)."""
        now = self._clock()

        def update(conn: Connection) -> bool:
            changed = conn.execute(
                "UPDATE tasks SET state = ?, turn_id = COALESCE(?, turn_id), updated_at = ?"
                f" WHERE id = ? AND state IN {_OPEN}",
                (state, turn_id, now, task_id),
            ).rowcount
            if changed:
                _append(conn, task_id, "state", state, now)
            return changed > 0

        return await self._db.run(update)

    async def finish(
        self, task_id: str, state: TaskState, result: str, *, events: bool = True
    ) -> bool:
        """The task ended (done, failed, interrupted) with ``result``; ``False`` (and nothing
        changes) when it had been stopped. Its answer and final state become events now, or,
        with ``events=False``, by :meth:`record_end` once its notes are all recorded (an API
        task: its notes and its last word reach its chat through the outbox, in order)."""
        now = self._clock()

        def update(conn: Connection) -> bool:
            changed = conn.execute(
                "UPDATE tasks SET state = ?, result = ?, finished_at = ?, updated_at = ?"
                f" WHERE id = ? AND state IN {_OPEN}",
                (state, result, now, now, task_id),
            ).rowcount
            if changed and events:
                _end(conn, task_id, state, result, now)
            return changed > 0

        return await self._db.run(update)

    async def record_end(self, task_id: str) -> bool:
        """The events of how a finished task ended (its answer, or why it failed; then its
        state), once; ``False`` while it is still open or when they are recorded already."""
        now = self._clock()

        def record(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT state, result FROM tasks WHERE id = ?", (task_id,)
            ).fetchone()
            if row is None or row[0] in OPEN_STATES:
                return False
            return _end(conn, task_id, row[0], row[1], now)

        return await self._db.run(record)

    async def stop(self, task_id: str, *, by: str) -> bool:
        """Stop an open task, durably, before its run is cancelled: a restart never resumes
        it, and every node of a cluster hears of it (``TASKS_TOPIC``: the one running it
        stops its turn at once). ``False`` when it had finished already."""
        now = self._clock()

        def update(conn: Connection) -> bool:
            changed = conn.execute(
                "UPDATE tasks SET state = 'stopped', finished_at = ?, updated_at = ?"
                f" WHERE id = ? AND state IN {_OPEN}",
                (now, now, task_id),
            ).rowcount
            if changed:
                _append(conn, task_id, "state", "stopped", now, key=END)
                conn.notify(TASKS_TOPIC, f"{task_id}\n{by}")
            return changed > 0

        return await self._db.run(update)

    async def get(self, task_id: str) -> TaskRecord | None:
        def query(conn: Connection) -> TaskRecord | None:
            row = conn.execute(
                f"SELECT {self._COLUMNS} FROM tasks WHERE id = ?", (task_id,)
            ).fetchone()
            return None if row is None else self._record(row)

        return await self._db.run(query, durable=False)

    async def running(self) -> list[TaskRecord]:
        """Tasks not finished yet (queued, running or awaiting approval), oldest first."""

        def query(conn: Connection) -> list[TaskRecord]:
            rows = conn.execute(
                f"SELECT {self._COLUMNS} FROM tasks WHERE state IN {_OPEN} ORDER BY created_at"
            )
            return [self._record(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def recent(
        self, *, limit: int, owner: tuple[str, str] | None = None, after: str | None = None
    ) -> list[TaskRecord]:
        """At most ``limit`` tasks, newest first: those acting for ``owner`` (its channel
        and sender id; ``None``: everyone's), and with ``after`` only those that come after
        that task in this order (the next page of a list that ended with it)."""
        where: list[str] = ["1 = 1"]
        params: list[object] = []
        if owner is not None:
            dialect = self._db.dialect
            where.append(
                f"{dialect.json_text('owner', 'channel')} = ?"
                f" AND {dialect.json_text('owner', 'sender_id')} = ?"
            )
            params.extend(owner)
        if after is not None:
            where.append("(created_at, id) < (SELECT created_at, id FROM tasks WHERE id = ?)")
            params.append(after)

        def query(conn: Connection) -> list[TaskRecord]:
            rows = conn.execute(
                f"SELECT {self._COLUMNS} FROM tasks WHERE {' AND '.join(where)}"
                " ORDER BY created_at DESC, id DESC LIMIT ?",
                (*params, limit),
            )
            return [self._record(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def interrupted(self, *, gone_only: bool = False) -> list[TaskRecord]:
        """Tasks a previous process left open, now marked interrupted (where tasks are not
        resumed: a cluster). In a cluster only the tasks of this node's name (an earlier
        run of it) and of nodes that are gone: a task whose node is alive (its membership
        connection is open) runs there and reports itself. ``gone_only``: only those of
        nodes that are gone (a running node's sweep: its own tasks run here). Each task is
        marked by one node however many sweep at once (the update says which it changed)."""
        now = self._clock()
        ours = f"state IN {_OPEN}"
        params: tuple[object, ...] = ()
        if self._db.dialect.name == "postgresql":
            gone = (
                "node IS NOT NULL AND node <> ? AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a"
                " WHERE a.datname = current_database()"
                " AND a.application_name = left('switchboard node ' || tasks.node, 63))"
            )
            ours += f" AND ({gone})" if gone_only else f" AND (node IS NULL OR node = ? OR {gone})"
            params = (self._node,) if gone_only else (self._node, self._node)

        def update(conn: Connection) -> list[TaskRecord]:
            rows = conn.execute(
                "UPDATE tasks SET state = 'interrupted', finished_at = ?, updated_at = ?"
                f" WHERE {ours} RETURNING {self._COLUMNS}",
                (now, now, *params),
            ).fetchall()
            for row in rows:
                _append(conn, row[0], "state", "interrupted", now, key=END)
            return [self._record(row) for row in rows]

        return await self._db.run(update)

    async def finished_with_open_turns(self) -> list[TaskRecord]:
        """Finished tasks whose turn is still open: stopped, and the process went before the
        cancelled turn was closed."""
        columns = ", ".join(f"t.{c.strip()}" for c in self._COLUMNS.split(","))

        def query(conn: Connection) -> list[TaskRecord]:
            rows = conn.execute(
                f"SELECT {columns} FROM tasks t JOIN turns u ON u.id = t.turn_id"
                f" WHERE t.state NOT IN {_OPEN} AND u.state = 'running'"
            )
            return [self._record(row) for row in rows]

        return await self._db.run(query, durable=False)

    async def counts(self) -> dict[str, int]:
        """Open tasks by state (for status and metrics)."""

        def query(conn: Connection) -> dict[str, int]:
            rows = conn.execute(
                f"SELECT state, COUNT(*) FROM tasks WHERE state IN {_OPEN} GROUP BY state"
            )
            return {state: int(count) for state, count in rows}

        return await self._db.run(query, durable=False)

    async def note(self, task_id: str, text: str, *, key: str) -> bool:
        """A progress note the task sent (``key``: its outbox key, so a repeated delivery
        records it once)."""
        now = self._clock()
        return await self._db.run(lambda conn: _append(conn, task_id, "note", text, now, key=key))

    async def ended(self, task_id: str) -> bool:
        """Whether the task's final state is among its events (or the task is gone)."""

        def query(conn: Connection) -> bool:
            row = conn.execute(
                "SELECT 1 FROM task_events WHERE task_id = ? AND key = ?", (task_id, END)
            ).fetchone()
            gone = conn.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone()
            return row is not None or gone is None

        return await self._db.run(query, durable=False)

    async def events(self, task_id: str, *, after: int = 0) -> list[TaskEvent]:
        def query(conn: Connection) -> list[TaskEvent]:
            rows = conn.execute(
                "SELECT seq, at, kind, text FROM task_events WHERE task_id = ? AND seq > ?"
                " ORDER BY seq",
                (task_id, after),
            )
            return [TaskEvent(int(seq), float(at), kind, text) for seq, at, kind, text in rows]

        return await self._db.run(query, durable=False)

    async def prune(self, before: float) -> int:
        """Forget tasks that finished before ``before``, and their events."""
        removed = await delete_batched(
            self._db, "tasks", f"state NOT IN {_OPEN} AND finished_at < ?", [before]
        )
        await delete_batched(self._db, "task_events", "task_id NOT IN (SELECT id FROM tasks)", [])
        return removed


def _end(conn: Connection, task_id: str, state: str, result: str | None, at: float) -> bool:
    """The answer (or why it failed), then the final state: once each (their keys)."""
    if result:
        _append(conn, task_id, "answer" if state == "done" else "note", result, at, key=RESULT)
    return _append(conn, task_id, "state", state, at, key=END)


def _append(
    conn: Connection,
    task_id: str,
    kind: EventKind,
    text: str,
    at: float,
    *,
    key: str | None = None,
) -> bool:
    """Add an event, numbered after its task's last one; with ``key``, only once."""
    row = conn.execute(
        "INSERT INTO task_events (task_id, seq, at, kind, text, key)"
        " SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM task_events WHERE task_id = ?"
        " ON CONFLICT (task_id, key) DO NOTHING RETURNING seq",
        (task_id, at, kind, text, key, task_id),
    ).fetchone()
    return row is not None
