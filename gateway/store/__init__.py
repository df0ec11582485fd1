"""The durable store: the journal, outbox, history and the rest, in one database.

The database is one SQLite file (WAL) by default, or a PostgreSQL database when
``storage.url`` names one (:func:`engine_for`); the repositories run on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, tzinfo
from pathlib import Path
from typing import Literal

from gateway.core.errors import ConfigError
from gateway.core.lifecycle import Service
from gateway.core.messages import OutboundMessage
from gateway.core.services import KnownChat
from gateway.store.access import AuditEntry, AuditLog, PairingRequest, Pairings
from gateway.store.api_requests import ApiRequests
from gateway.store.approvals import ApprovalRequest, ApprovalRequests, ApprovalState
from gateway.store.cluster.nodes import NodeInfo, Nodes
from gateway.store.deliveries import Deliveries, DeliveryStatus
from gateway.store.drafts import Drafts
from gateway.store.engine.backups import SOFTWARE_KEY, Backup, software
from gateway.store.engine.db import Database, Engine
from gateway.store.engine.integrity import COPY_TAKEN_KEY
from gateway.store.engine.retention import Retention
from gateway.store.engine.schema import MIGRATIONS
from gateway.store.engine.sql import Connection
from gateway.store.engine.sqlite import SqliteEngine
from gateway.store.group_context import GroupContext, HeardMessage
from gateway.store.history import (
    History,
    NewMessage,
    SessionState,
    SessionSummary,
    ShownMessage,
    StoredMessage,
)
from gateway.store.home import HomeChat, HomeChats
from gateway.store.jobs import Job, Jobs
from gateway.store.journal import InboundRecord, Journal, LastTurn, OpenTurn, OpenWork, TurnEnd
from gateway.store.ledger import KeyValue, LedgerEntry, ToolLedger
from gateway.store.links import LinkCode, PersonLinks, StoredLink
from gateway.store.memory_entries import MemoryEntries, Origin
from gateway.store.metering.spend import SpendNotices, WaitingNotice
from gateway.store.metering.usage import (
    Spender,
    UsageGroup,
    UsageRecord,
    UsageReport,
    UsageTotals,
)
from gateway.store.metering.voice import VoiceMinutes
from gateway.store.outbox import Outbox, OutboxRecord
from gateway.store.people import People, Person
from gateway.store.pins import AgentConversation, AgentConversations, Goal, Pins
from gateway.store.recall import KeywordHit, Recall, Said, StoredVector
from gateway.store.tasks import TaskEvent, TaskRecord, Tasks
from gateway.store.webhook_bodies import WebhookBodies

__all__ = [
    "AgentConversation",
    "AgentConversations",
    "ApiRequests",
    "ApprovalRequest",
    "ApprovalRequests",
    "ApprovalState",
    "AuditEntry",
    "AuditLog",
    "Database",
    "Deliveries",
    "DeliveryStatus",
    "Drafts",
    "Engine",
    "Goal",
    "GroupContext",
    "HeardMessage",
    "History",
    "HomeChat",
    "HomeChats",
    "InboundRecord",
    "Job",
    "Jobs",
    "Journal",
    "KeyValue",
    "KeywordHit",
    "KnownChat",
    "LastTurn",
    "LedgerEntry",
    "LinkCode",
    "MemoryEntries",
    "NewMessage",
    "NodeInfo",
    "Nodes",
    "OpenTurn",
    "OpenWork",
    "Origin",
    "Outbox",
    "OutboxRecord",
    "PairingRequest",
    "Pairings",
    "People",
    "Person",
    "PersonLinks",
    "Pins",
    "Recall",
    "Retention",
    "Said",
    "SessionState",
    "SessionSummary",
    "ShownMessage",
    "SpendNotices",
    "Spender",
    "Store",
    "StoredLink",
    "StoredMessage",
    "StoredVector",
    "TaskEvent",
    "TaskRecord",
    "Tasks",
    "ToolLedger",
    "TurnEnd",
    "UsageGroup",
    "UsageRecord",
    "UsageReport",
    "UsageTotals",
    "WaitingNotice",
    "WebhookBodies",
]


def engine_for(
    path: Path,
    url: str | None = None,
    *,
    synchronous: Literal["full", "normal"] = "full",
    node: str = "",
    backups: Path | None = None,
    migrate: bool = True,
) -> Engine:
    """The SQLite file at ``path``, or, when ``url`` is set (``storage.url``), the
    PostgreSQL database it names. ``backups``: where the SQLite file is copied before a
    migration; ``migrate``: whether an older schema may be migrated (PostgreSQL: its owner
    made a backup; either: this process is the gateway starting, or ``switchboard
    upgrade``), else it is refused."""
    if not url:
        return SqliteEngine(path, synchronous=synchronous, backups=backups, migrate=migrate)
    from gateway.store.engine.postgres import PostgresEngine, is_postgres_url  # noqa: PLC0415 - psycopg only when used

    if not is_postgres_url(url):
        raise ConfigError(
            "storage.url must be a postgresql:// URL (leave it unset for the SQLite file)",
            field="storage.url",
        )
    return PostgresEngine(url, synchronous=synchronous, node=node, migrate=migrate)


class Store(Service):
    """All repositories over one database, plus the turn commit that spans them."""

    def __init__(
        self,
        path: Path,
        *,
        url: str | None = None,
        synchronous: Literal["full", "normal"] = "full",
        clock: Callable[[], float] = time.time,
        node: str = "",
        backups: Path | None = None,
        migrate: bool = True,
        zone: tzinfo = UTC,
    ) -> None:
        """The store in the SQLite file at ``path``, or in the PostgreSQL database of
        ``url`` (``storage.url``) when that is set; ``node``: this node of a cluster (its
        connection is named after it, and background tasks are recorded as its own).
        ``backups`` and ``migrate``: a schema change's copy first (gateway/store/engine/backups.py).
        ``zone``: the owner's (``user.timezone``), whose days usage is counted in."""
        engine = engine_for(
            path, url, synchronous=synchronous, node=node, backups=backups, migrate=migrate
        )
        self.db = Database(engine)
        self.journal = Journal(self.db, clock=clock)
        self.outbox = Outbox(self.db, clock=clock)
        self.history = History(self.db, clock=clock)
        self.ledger = ToolLedger(self.db, clock=clock)
        self.kv = KeyValue(self.db, clock=clock)
        self.homes = HomeChats(self.kv)
        self.pairings = Pairings(self.db, clock=clock)
        self.audit = AuditLog(self.db, clock=clock)
        self.usage = UsageReport(self.db, clock=clock, zone=zone)
        self.jobs = Jobs(self.db, clock=clock)
        self.tasks = Tasks(self.db, clock=clock, node=node)
        self.pins = Pins(self.db, clock=clock)
        self.agent_conversations = AgentConversations(self.db, clock=clock)
        self.approval_requests = ApprovalRequests(self.db)
        self.drafts = Drafts(self.db, clock=clock)
        self.deliveries = Deliveries(self.db, clock=clock)
        self.nodes = Nodes(self.db)
        self.group_context = GroupContext(self.db, clock=clock)
        self.people = People(self.db, clock=clock)
        self.links = PersonLinks(self.db)
        self.voice = VoiceMinutes(self.db, clock=clock)
        self.webhook_bodies = WebhookBodies(self.db, clock=clock)
        self.api_requests = ApiRequests(self.db, clock=clock)
        self.recall = Recall(self.db, clock=clock)
        self.memory_entries = MemoryEntries(self.db)
        self.spend_notices = SpendNotices(self.db, self.outbox, clock=clock)

    async def start(self) -> None:
        await self.db.start()
        # which Switchboard opened it last: a copy made before the next migration says so
        await self.kv.set(SOFTWARE_KEY, software(len(MIGRATIONS)))

    async def stop(self) -> None:
        await self.db.stop()

    @property
    def migrated_from(self) -> Backup | None:
        """The copy made before this process migrated the store (None: it migrated none)."""
        return self.db.engine.migrated_from

    async def commit_turn(
        self,
        *,
        turn_id: str,
        session_key: str,
        replies: Sequence[OutboundMessage],
        state: TurnEnd = "done",
        home: HomeChat | None = None,
        usage: Sequence[UsageRecord] = (),
        history_extra: Sequence[tuple[str, NewMessage]] = (),
        finished_job: str | None = None,
        scope: str | None = None,
        member: str | None = None,
        tainted: bool = False,
    ) -> None:
        """Atomically: history drafts become final, replies are queued, the turn and its
        inbound messages are closed. After this, a crash of the process cannot repeat or
        lose the turn.

        Without an fsync of its own: nothing of the turn is shown before a durable commit
        after it (the mark before each reply's send, gateway/store/outbox.py), and the
        log is written in order, so that commit carries this one to the disk. A power cut
        before then loses the turn whole, with nothing of it shown: it runs again from its
        messages (the tool ledger, written durably before any side effect, keeps those from
        being repeated).

        ``scope``: whose conversation the session is (``agent/memory.py:recall_scope``);
        ``member``: the person a group's turn was for, who may search that group's
        conversations from then on; ``tainted``: the turn read outside content (its
        answers are stored marked so, :func:`gateway.store.history.shaped_by_outside`)."""

        def commit(conn: Connection) -> None:
            self.history.finalize_statement(conn, session_key, turn_id, scope, tainted=tainted)
            if scope is not None and member is not None:
                self.recall.member_statement(conn, scope, member)
            self.outbox.enqueue_statement(conn, replies)
            self.journal.finish_statement(conn, turn_id, state)
            if home is not None:
                self.homes.set_statement(conn, home)
            for record in usage:
                record.insert_statement(conn, turn_id, session_key)
            for other_session, message in history_extra:
                self.history.append_final_statement(conn, other_session, message)
            if finished_job is not None:
                self.jobs.finish_statement(conn, finished_job)

        await self.db.run(commit, durable=False)

    async def start_fresh(self, session_key: str, notices: Sequence[OutboundMessage]) -> int:
        """Atomically: the session's conversation starts afresh (``/new``) and ``notices``
        are queued (the word to its chat that the owner did it from the control center), so
        the chat is told once, and never of a fresh start that did not happen. The new
        generation."""

        def start(conn: Connection) -> int:
            generation = self.history.new_generation_statement(conn, session_key)
            self.outbox.enqueue_statement(conn, notices)
            return generation

        return await self.db.run(start)

    async def settle_copy(
        self,
        *,
        turns: Sequence[OpenTurn],
        records: Sequence[InboundRecord],
        notices: Sequence[OutboundMessage],
    ) -> None:
        """Atomically, in a restored copy's first start: its open ``turns`` and waiting
        ``records`` end without an answer (the original went on with them after the copy
        was taken), their draft messages are forgotten without being touched (the original
        finished them into its answers), ``notices`` are queued, and the copy's mark goes,
        so this happens once (gateway/runtime/intake/restored.py)."""

        def settle(conn: Connection) -> None:
            for turn in turns:
                self.journal.finish_statement(conn, turn.id, "failed")
                conn.execute("DELETE FROM stream_drafts WHERE turn_id = ?", (turn.id,))
            self.journal.close_statement(conn, [record.id for record in records])
            self.outbox.enqueue_statement(conn, notices)
            conn.execute("DELETE FROM kv WHERE key = ?", (COPY_TAKEN_KEY,))

        await self.db.run(settle)

    async def park_turn(
        self,
        *,
        approval: ApprovalRequest,
        messages: Sequence[OutboundMessage],
        usage: Sequence[UsageRecord] = (),
    ) -> None:
        """Atomically: the approval request is stored, its messages (to the approvers, and
        to the requester that it waits) are queued, and the model usage of the turn so far
        is recorded. The turn itself stays open; it resumes once the request is decided."""

        def park(conn: Connection) -> None:
            self.approval_requests.insert_statement(conn, approval)
            self.outbox.enqueue_statement(conn, messages)
            for record in usage:  # this run's rows: the resumed turn's run adds its own
                record.insert_statement(conn, approval.turn_id, approval.session_key)

        await self.db.run(park)

    async def prune(self, now: float, retention: Retention) -> dict[str, int]:
        """Delete records of finished work older than ``retention`` allows, as of ``now``;
        returns how many rows went, per kind. Pending deliveries, open turns and their tool
        calls, running tasks, active jobs, approved pairings, conversation history and memory
        are never touched."""
        records = now - retention.records
        return {
            "inbound": await self.journal.prune(retention.journal, now=now),
            # never before their inbound messages: those point at their turn
            "turns": await self.journal.prune_turns(
                now - max(retention.records, retention.journal)
            ),
            # the platforms' delivery reports on sent messages go with the outbox's rows
            "outbox": await self.outbox.prune(records) + await self.deliveries.prune(records),
            "tool calls": await self.ledger.prune(records),
            "tasks": await self.tasks.prune(records),
            "jobs": await self.jobs.prune(records),
            "pairing requests": await self.pairings.prune(records),
            "approval requests": await self.approval_requests.prune(records),
            "stream drafts": await self.drafts.prune(records),
            # what was said in groups while nobody addressed the bot: the journal's window
            "group context": await self.group_context.prune(now - retention.journal),
            # the webhook bodies already seen: as long as the deliveries they name
            "webhook bodies": await self.webhook_bodies.prune(now - retention.journal),
            # the API's requests an SDK's retry is matched to: their window (15 minutes)
            "api requests": await self.api_requests.prune(now),
            "audit": await self.audit.prune(now - retention.audit),
            # the minutes of speech transcribed count as usage too
            "usage": await self.usage.prune(now - retention.usage)
            + await self.voice.prune(now - retention.usage),
            # a month's notices outlive the month: usage is kept at least 31 days
            "spend notices": await self.spend_notices.prune(now - retention.usage),
        }
