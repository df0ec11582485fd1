"""Daily housekeeping: records of finished work and old traces go once they are old enough;
open work, history, memory and the pairing allowlist never do (on SQLite and PostgreSQL);
the scheduler runs it once a day; the web server's failed-login tracking stays bounded
under a flood of addresses."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.config.settings import load_settings
from gateway.core.errors import ConfigError
from gateway.core.messages import ChatRef, InboundMessage, OutboundMessage
from gateway.core.schedule_spec import ScheduleSpec
from gateway.runtime.schedule.housekeeping import housekeep, prune_traces
from gateway.store import (
    ApprovalRequest,
    Job,
    NewMessage,
    Retention,
    Store,
    TaskRecord,
    UsageRecord,
)
from gateway.store.approvals import ApprovalState, approval_id
from gateway.store.engine.retention import DAY, delete_batched
from tests.backends import StoreFactory
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC).timestamp()
OWNER = {"channel": "t", "sender_id": "owner", "role": "owner"}


class Clock:
    """The store's time (a float clock), set by the test before each write."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def inbound(platform_id: str, chat: str = "c1") -> InboundMessage:
    return InboundMessage(
        channel="t", chat_id=chat, sender_id="u", text="hi", platform_message_id=platform_id
    )


def outbound(key: str, text: str, chat: str) -> OutboundMessage:
    return OutboundMessage(channel="t", chat_id=chat, text=text, idempotency_key=key)


def job(job_id: str, spec: ScheduleSpec) -> Job:
    return Job(job_id, spec, "check the mail", None, ChatRef("t", "c1"), OWNER)


def task(task_id: str) -> TaskRecord:
    return TaskRecord(task_id, "research", "general", ChatRef("t", "c1"), OWNER, "running")


def approval(call_key: str, state: str, at: float) -> ApprovalRequest:
    return ApprovalRequest(
        id=approval_id(call_key),
        call_key=call_key,
        turn_id=call_key.partition(":")[0],
        session_key="t:c1",
        tool="exec",
        arguments={"command": "ls"},
        fingerprint="f",
        reason="members may not run commands",
        requester={"channel": "t", "sender_id": "u"},
        approvers=("t:owner",),
        state=ApprovalState(state),
        created_at=at,
        expires_at=at + 900,
        decided_at=None if state == "pending" else at + 60,
    )


def once(at: float) -> ScheduleSpec:
    return ScheduleSpec("once", "UTC", at=datetime.fromtimestamp(at + 60, UTC))


async def posted_draft(store: Store, chat_key: str, turn: str, message_id: str) -> None:
    slot = await store.drafts.posting("t", chat_key, turn, None)
    await store.drafts.posted("t", chat_key, turn, slot, message_id)


async def finished_work(store: Store, clock: Clock, tag: str, at: float) -> None:
    """One record of every prunable kind, all finished at ``at``; ids start with ``tag-``."""
    clock.now = at
    when = datetime.fromtimestamp(at, UTC)
    record = await store.journal.accept(inbound(f"{tag}-msg"))
    assert record is not None
    await store.group_context.keep(
        channel="t", chat_key="t:g", platform_id=f"{tag}-heard", author="a", text="x", at=at
    )
    await store.webhook_bodies.claim("ci", f"{tag}-body", f"{tag}-delivery", until=None)
    turn = f"{tag}-turn"
    await store.journal.start_turn(turn, record.session_key, "chat", [record.id])
    await store.ledger.start(f"{turn}:call-1", "send_email")
    await store.ledger.finish(f"{turn}:call-1", "sent")
    await posted_draft(store, f"{tag}-gone", turn, "7")  # a draft never finished
    await store.history.add_checkpoints(
        record.session_key, turn, [NewMessage("user", {"role": "user", "content": f"{tag} hi"})]
    )
    await store.jobs.add(job(f"{tag}-once", once(at)))
    await store.jobs.record_run(f"{tag}-once", when, None)  # fired; done with the turn below
    await store.commit_turn(
        turn_id=turn,
        session_key=record.session_key,
        replies=[outbound(f"{turn}:reply", f"{tag} answer", chat=f"{tag}-sent")],
        usage=[UsageRecord("t", "model", 10, 5, at=at)],
        finished_job=f"{tag}-once",
    )
    await store.spend_notices.claim("limits.gateway_daily_usd", f"{tag}-day", [50, 80], None)
    await store.outbox.enqueue([outbound(f"{tag}-failed", f"{tag} undeliverable", f"{tag}-gone")])
    for head in await store.outbox.heads("t"):
        if head.message.text == f"{tag} answer":
            await store.outbox.mark_sent(head.id)
        elif head.message.text == f"{tag} undeliverable":
            await store.outbox.mark_failed(head.id, "chat not found")
    await store.jobs.add(job(f"{tag}-removed", once(at)))
    await store.jobs.remove(f"{tag}-removed")
    for state in ("approved", "denied", "expired"):
        asked = approval(f"{tag}-turn:{state}", state, at)
        await store.park_turn(approval=asked, messages=[])
    for task_id, state in ((f"{tag}-task", "done"), (f"{tag}-failed-task", "failed")):
        await store.tasks.start(task(task_id))
        await store.tasks.finish(task_id, state, "result")
    for outcome in ("denied", "revoked", "expired"):
        request = (
            await store.pairings.request(
                channel="t",
                sender_id=f"{tag}-{outcome}",
                sender_name="",
                chat_id="c",
                max_pending=99,
            )
        ).request
        if outcome != "expired":  # left to expire after its hour
            decided = "denied" if outcome == "denied" else "approved"
            await store.pairings.decide(request.code, decided)
        if outcome == "revoked":
            await store.pairings.revoke("t", f"{tag}-revoked")
    await store.audit.record("refused", channel="t", sender_id=f"{tag}-refused")
    # an API request an SDK's retry would be matched to, for 15 minutes
    await store.api_requests.remember("api:ops", f"{tag}-body", f"{tag}-request", keep=900)


KINDS = {
    "inbound": "SELECT platform_id FROM inbound",
    "turns": "SELECT id FROM turns",
    "outbox": "SELECT idem_key FROM outbox",
    "tool calls": "SELECT key FROM tool_ledger",
    "tasks": "SELECT id FROM tasks",
    "jobs": "SELECT id FROM jobs",
    "pairing requests": "SELECT sender_id FROM pairing",
    "approval requests": "SELECT call_key FROM approvals",
    "stream drafts": "SELECT turn_id FROM stream_drafts",
    "group context": "SELECT platform_id FROM group_context",
    "webhook bodies": "SELECT digest FROM webhook_bodies",
    "audit": "SELECT sender_id FROM audit",
    "usage": "SELECT turn_id FROM usage",
    "spend notices": "SELECT period FROM spend_notices",
    "api requests": "SELECT message_id FROM api_requests",
}


async def tags_left(store: Store) -> dict[str, list[str]]:
    """Per kind, the tags of the records still stored."""

    def query(conn: Any) -> dict[str, list[str]]:
        return {
            kind: sorted({str(value).split("-")[0] for (value,) in conn.execute(sql)})
            for kind, sql in KINDS.items()
        }

    return await store.db.run(query)


async def test_each_kind_of_finished_record_goes_after_its_own_retention(
    make_store: StoreFactory,
) -> None:
    clock = Clock()
    async with make_store(clock=clock) as store:
        for days in (200, 120, 20, 3):  # oldest first, as a gateway writes them
            await finished_work(store, clock, f"d{days}", NOW - days * DAY)
        removed = await store.prune(NOW, Retention())
        left = await tags_left(store)
        _, history = await store.history.load("t:c1", limit=100)
    records = ["d20", "d3"]  # 30 days
    assert left == {
        "inbound": ["d3"],  # the 7-day dedup window
        "turns": records,
        "outbox": records,
        "tool calls": records,
        "tasks": records,
        "jobs": records,
        "pairing requests": records,
        "approval requests": records,
        "stream drafts": records,
        "group context": ["d3"],  # the journal's 7 days
        "webhook bodies": ["d3"],  # the journal's 7 days
        "audit": ["d120", "d20", "d3"],  # 180 days
        "usage": ["d20", "d3"],  # 90 days
        "spend notices": ["d20", "d3"],  # usage's 90 days
        "api requests": [],  # their 15 minutes
    }
    assert removed == {
        "inbound": 3,
        "turns": 2,
        "outbox": 4,
        "tool calls": 2,
        "tasks": 4,
        "jobs": 4,
        "pairing requests": 6,
        "approval requests": 6,
        "stream drafts": 2,
        "group context": 3,
        "webhook bodies": 3,
        "audit": 1,
        "usage": 2,
        "spend notices": 4,
        "api requests": 1,  # each request forgot the expired ones before it when it came
    }
    # the conversation itself is never pruned
    assert [m.body["content"] for m in history] == ["d200 hi", "d120 hi", "d20 hi", "d3 hi"]


async def test_open_work_history_and_the_pairing_allowlist_are_never_pruned(
    make_store: StoreFactory,
) -> None:
    clock = Clock(NOW - 400 * DAY)  # a year old and still open
    async with make_store(clock=clock) as store:
        waiting = await store.journal.accept(inbound("waiting"))
        running = await store.journal.accept(inbound("running", chat="c2"))
        assert waiting is not None and running is not None
        await store.journal.start_turn("open-turn", running.session_key, "chat", [running.id])
        await store.ledger.start("open-turn:call-1", "send_email")  # outcome unknown
        await posted_draft(store, "t:c2", "open-turn", "12")  # its answer streams
        await store.outbox.enqueue([outbound("stuck", "still to deliver", chat="held")])
        await store.tasks.start(task("running-task"))
        await store.jobs.add(job("daily", ScheduleSpec("cron", "UTC", cron="0 9 * * *")))
        await store.jobs.add(job("firing", once(clock.now)))
        await store.jobs.record_run("firing", datetime.fromtimestamp(clock.now, UTC), None)
        approved = (
            await store.pairings.request(
                channel="t", sender_id="friend", sender_name="", chat_id="c"
            )
        ).request
        await store.pairings.decide(approved.code, "approved")
        await store.pairings.request(
            channel="t", sender_id="patient", sender_name="", chat_id="c", ttl=500 * DAY
        )
        await store.pins.write_note("main", "owner", "plan", "the plan")
        await store.pins.add_goal("main", "owner", "ship it")
        await store.kv.set("last_chat", {"channel": "t", "chat_id": "c1"})
        await store.park_turn(
            approval=approval("open-turn:waiting", "pending", clock.now), messages=[]
        )
        await finished_work(store, clock, "old", clock.now)

        removed = await store.prune(NOW, Retention())

        assert all(count >= 1 for count in removed.values())  # the finished work went
        work = await store.journal.open_work()
        assert [r.message.platform_message_id for r in work.pending] == ["waiting"]
        assert [(t.id, [r.id for r in t.records]) for t in work.running] == [
            ("open-turn", [running.id])
        ]
        entry = await store.ledger.get("open-turn:call-1")
        assert entry is not None and entry.state == "started"  # never sent twice on resume
        assert [h.message.text for h in await store.outbox.heads("t")] == ["still to deliver"]
        assert [t.id for t in await store.tasks.running()] == ["running-task"]
        assert [j.id for j in await store.jobs.active()] == ["daily"]
        assert [j.id for j in await store.jobs.firing()] == ["firing"]
        assert await store.pairings.is_approved("t", "friend")
        listed = {r.sender_id for r in await store.pairings.listing()}
        assert listed == {"friend", "patient"}
        assert await store.pins.note("main", "owner", "plan") == "the plan"
        assert [g.text for g in await store.pins.goals("main", "owner")] == ["ship it"]
        assert await store.kv.get("last_chat") == {"channel": "t", "chat_id": "c1"}
        assert [a.call_key for a in await store.approval_requests.pending()] == [
            "open-turn:waiting"
        ]
        assert (await store.drafts.of("t", "t:c2", "open-turn")).ids == ("12",)
        _, history = await store.history.load("t:c1", limit=10)
        assert [m.body["content"] for m in history] == ["old hi"]


async def test_deletes_go_in_batches_until_every_old_row_is_gone(make_store: StoreFactory) -> None:
    clock = Clock(NOW - 200 * DAY)
    async with make_store(synchronous="normal", clock=clock) as store:
        for i in range(25):
            await store.audit.record("refused", sender_id=f"old-{i}")
        clock.now = NOW
        for i in range(3):
            await store.audit.record("refused", sender_id=f"new-{i}")
        assert await delete_batched(store.db, "audit", "at < ?", [NOW - DAY], batch=4) == 25
        assert sorted(e.sender_id or "" for e in await store.audit.recent(100)) == [
            "new-0",
            "new-1",
            "new-2",
        ]
        # an exact multiple of the batch: the last batch comes back empty and the loop ends
        assert await delete_batched(store.db, "audit", "at <= ?", [NOW], batch=3) == 3
        assert await store.audit.recent(100) == []

        # the store's own prune, past its default batch of 2,000 rows
        usage = UsageRecord("t", "model", 1, 1, at=NOW - 200 * DAY)
        await asyncio.gather(*(store.usage.record(f"u{i}", "t:c1", usage) for i in range(2_100)))
        await store.usage.record("today", "t:c1", UsageRecord("t", "model", 7, 0, at=NOW))
        removed = await store.prune(NOW, Retention())
        assert removed["usage"] == 2_100
        assert [t.input_tokens for t in await store.usage.since(DAY)] == [7]


def write(path: Path, mtime: float, text: str = '{"event": "turn"}\n') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


def day_folder(traces: Path, at: float) -> Path:
    return traces / date.fromtimestamp(at).isoformat()


def test_old_trace_files_and_their_day_folders_go_and_todays_stay(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    now = time.time()
    old = now - 40 * DAY
    old_day = day_folder(traces, old)
    gone = [write(old_day / "a.jsonl", old), write(old_day / "b.jsonl", old)]
    todays = write(day_folder(traces, now) / "c.jsonl", now)
    empty_recent = day_folder(traces, now - 2 * DAY)
    empty_recent.mkdir()
    # a turn started last month and resumed yesterday: its file is recent, so it stays
    resumed = write(day_folder(traces, now - 35 * DAY) / "d.jsonl", now - DAY)
    # not traces: left alone, and so is the folder holding them
    notes = write(day_folder(traces, now - 50 * DAY) / "notes.txt", old)
    archived = write(traces / "archive" / "e.jsonl", old)
    outside = write(tmp_path / "elsewhere.jsonl", old)
    link = day_folder(traces, now - 60 * DAY) / "link.jsonl"
    link.parent.mkdir()
    link.symlink_to(outside)

    assert prune_traces(traces, now - 30 * DAY) == 2

    assert not any(p.exists() for p in gone) and not old_day.exists()
    assert todays.exists() and resumed.exists() and empty_recent.is_dir()
    assert notes.exists() and archived.exists() and link.is_symlink() and outside.exists()
    assert prune_traces(tmp_path / "no-traces-yet", now) == 0


async def test_housekeeping_follows_the_storage_settings_and_leaves_memory_alone(
    make_settings: SettingsFactory,
) -> None:
    settings = make_settings(
        storage={"retention_days": 10, "audit_retention_days": 7, "usage_retention_days": 31}
    )
    memory = [
        write(settings.workspace_dir / "MEMORY.md", NOW - 300 * DAY, "# Memory\n"),
        write(settings.workspace_dir / "memory" / "2025-08-01.md", NOW - 300 * DAY, "notes\n"),
    ]
    traces = settings.data_dir / "traces"
    old_trace = write(day_folder(traces, NOW - 15 * DAY) / "d15-turn.jsonl", NOW - 15 * DAY)
    new_trace = write(day_folder(traces, NOW - 5 * DAY) / "d5-turn.jsonl", NOW - 5 * DAY)
    clock = Clock()
    async with Store(settings.data_dir / "switchboard.db", clock=clock) as store:
        await finished_work(store, clock, "d15", NOW - 15 * DAY)  # kept by the defaults
        await finished_work(store, clock, "d5", NOW - 5 * DAY)
        removed = await housekeep(store, settings, NOW)
        left = await tags_left(store)
    assert removed["turns"] == 1 and removed["audit"] == 1 and removed["usage"] == 0
    assert removed["traces"] == 1
    assert left["turns"] == ["d5"] and left["audit"] == ["d5"] and left["usage"] == ["d15", "d5"]
    assert not old_trace.exists() and new_trace.exists()
    assert all(path.exists() for path in memory)


async def test_the_scheduler_housekeeps_soon_after_start_and_then_once_a_day(
    run_gateway: Any, make_settings: SettingsFactory
) -> None:
    settings = make_settings(heartbeat={"enabled": False})
    start = datetime.now(UTC).replace(microsecond=0)
    long_ago = start.timestamp() - 40 * DAY
    clock = Clock()
    async with Store(settings.data_dir / "switchboard.db", clock=clock) as store:
        await finished_work(store, clock, "old", long_ago)
    traces = settings.data_dir / "traces"
    old_trace = write(day_folder(traces, long_ago) / "old-turn.jsonl", long_ago)
    fake = FakeClock(start)
    async with run_gateway(settings, clock=fake) as (gateway, channel):
        scheduler = gateway.scheduler
        await channel.push("hello", message_id="fresh-1")
        await channel.wait_for(1)
        await asyncio.wait_for(gateway.wait_idle(), 10)
        assert scheduler.last_housekeeping is None  # not while the gateway is starting up

        await fake.advance(minutes=5)
        await asyncio.wait_for(scheduler.housekept.wait(), 10)
        assert scheduler.last_housekeeping is not None
        when, removed = scheduler.last_housekeeping
        assert when == start + timedelta(minutes=5)
        assert removed["inbound"] == 1 and removed["turns"] == 1 and removed["traces"] == 1
        left = await tags_left(gateway.store)
        kept = [kind for kind, tags in left.items() if "old" in tags]
        assert kept == ["audit", "usage", "spend notices"]
        assert not old_trace.exists()
        # today's conversation is untouched: a redelivered message is still recognised
        assert await gateway.store.journal.seen("memory", "fresh-1")
        assert list(traces.glob("*/*.jsonl")), "today's trace stays"

        scheduler.housekept.clear()
        await fake.advance(hours=23)
        await fake.advance(hours=1)
        await asyncio.wait_for(scheduler.housekept.wait(), 10)
        assert scheduler.last_housekeeping is not None
        assert scheduler.last_housekeeping[0] == start + timedelta(hours=24, minutes=5)
    assert channel.texts() == ["echo: hello"]


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("SWITCHBOARD_STORAGE__RETENTION_DAYS", "6", "storage.retention_days"),
        ("SWITCHBOARD_STORAGE__AUDIT_RETENTION_DAYS", "0", "storage.audit_retention_days"),
        ("SWITCHBOARD_STORAGE__USAGE_RETENTION_DAYS", "30", "storage.usage_retention_days"),
    ],
)
def test_retention_too_short_is_a_config_error_naming_the_field(
    variable: str, value: str, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == field
    assert field in str(caught.value)


def test_retention_settings_from_config_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("SWITCHBOARD_HOME", str(home))
    assert load_settings().storage.retention_days == 30
    (home / "config.toml").write_text("[storage]\nretention_days = 7\n")
    assert load_settings().storage.retention_days == 7
    (home / "config.toml").write_text("[storage]\nretention_days = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == "storage.retention_days"
    assert f"(set by {home / 'config.toml'} line 2)" in str(caught.value)
