"""The outbox's send states on both engines: an attempt is on disk before the platform call,
its result the moment it returns, and a row left ``sending`` by a crash comes back as lost
(gateway/store/outbox.py). Also: the store's urgent lane, the draft posts recorded before
they are made, the drafts a claim of their session retires, and a cluster node that lost
the lead never marking a send.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from gateway.core.channel import SendAttempt
from gateway.store import Store
from gateway.store.cluster.membership import Membership
from gateway.store.drafts import TurnOver
from gateway.store.engine.sql import Connection
from gateway.store.outbox import OutboxState
from tests.backends import StoreFactory
from tests.test_store import inbound, outbound


async def test_an_attempt_is_recorded_before_the_call_and_found_lost_after_a_crash(
    make_store: StoreFactory,
) -> None:
    attempt = SendAttempt(1000.0, "run/41")
    async with make_store() as store:
        await store.outbox.enqueue([outbound("k1", "the answer")])
        [head] = await store.outbox.heads("t")
        assert head.state is OutboxState.PENDING and not head.lost
        marked = await store.outbox.mark_sending(head.id, attempt)
        assert marked is not None and marked.open_sends == (attempt,)
    async with make_store() as store:  # the process died before the send returned
        [head] = await store.outbox.heads("t")
        assert head.lost and head.open_sends == (attempt,)
        assert await store.outbox.pending_count() == 1  # not delivered yet
        await store.outbox.mark_sent(head.id, "57")
        assert await store.outbox.heads("t") == []
        assert await store.outbox.pending_count() == 0


async def test_a_failed_attempt_keeps_the_row_sending_with_every_attempt(
    make_store: StoreFactory,
) -> None:
    first, second = SendAttempt(1000.0, "a"), SendAttempt(1010.0, "b")
    async with make_store() as store:
        await store.outbox.enqueue([outbound("k1", "the answer")])
        [head] = await store.outbox.heads("t")
        await store.outbox.mark_sending(head.id, first)
        await store.outbox.retry_later(head.id, 0.0, "timed out")  # it may have arrived
        [head] = await store.outbox.heads("t")
        assert head.lost and head.attempts == 1
        await store.outbox.mark_sending(head.id, second)
        [head] = await store.outbox.heads("t")
        assert head.open_sends == (first, second)
        await store.outbox.mark_failed(head.id, "chat not found")
        assert await store.outbox.heads("t") == []


async def test_what_the_store_knows_around_a_lost_send(make_store: StoreFactory) -> None:
    async with make_store() as store:
        record = await store.journal.accept(inbound("c1:7"))
        assert record is not None
        await store.journal.start_turn("turn-1", record.session_key, "chat", [record.id])
        await store.outbox.enqueue([outbound("other", "an earlier answer", chat="c2")])
        [other] = await store.outbox.heads("t")
        await store.outbox.mark_sent(other.id, "11,12")
        await store.journal.start_turn("turn-2", "t:c3", "chat", [])  # another chat's turn
        slot = await store.drafts.posting("t", "t:c3", "turn-2", None)
        await store.drafts.posted("t", "t:c3", "turn-2", slot, "13")
        known = await store.outbox.known("t", since=time.time() - 60, turn_id="turn-1")
    assert sorted((k.chat_id, k.message_id) for k in known) == [
        ("c1", "c1:7"),  # the message the turn answers
        ("c2", "11"),
        ("c2", "12"),
        ("c3", "13"),  # another turn's draft
    ]


async def test_a_draft_post_is_recorded_before_it_is_made(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await store.journal.start_turn("turn-1", "t:c1", "chat", [])
        first = await store.drafts.posting("t", "t:c1", "turn-1", "run/5")
        await store.drafts.posted("t", "t:c1", "turn-1", first, "6")
        await store.drafts.posting("t", "t:c1", "turn-1", "run/6")  # the process dies here
    async with make_store() as store:
        stored = await store.drafts.of("t", "t:c1", "turn-1")
        assert stored.ids == ("6",)
        assert [(a.mark, a.draft) for a in stored.lost] == [("run/6", True)]
        third = await store.drafts.posting("t", "t:c1", "turn-1", None)  # after the lost one
        assert third == 2
        await store.drafts.not_posted("t", "t:c1", "turn-1", third)  # refused: nothing to find
        assert len((await store.drafts.of("t", "t:c1", "turn-1")).lost) == 1


async def test_a_claim_retires_the_drafts_posted_under_the_earlier_claim(
    make_store: StoreFactory,
) -> None:
    """A node that lost the session may still be editing them (it has not noticed): the
    answer is never delivered into them, and a lost send never takes them for its own."""
    async with make_store() as store:
        await store.journal.start_turn("turn-1", "t:c1", "chat", [])
        await store.journal.start_turn("turn-2", "t:c2", "chat", [])
        assert (await store.journal.session_work("t:c1", (), claim_by="a")).epoch == 1
        first = await store.drafts.posting("t", "t:c1", "turn-1", None)
        await store.drafts.posted("t", "t:c1", "turn-1", first, "6")
        await store.drafts.posting("t", "t:c1", "turn-1", "run/6")  # its id never recorded
        other = await store.drafts.posting("t", "t:c2", "turn-2", None)
        await store.drafts.posted("t", "t:c2", "turn-2", other, "7")

        assert (await store.journal.session_work("t:c1", (), claim_by="b")).epoch == 2
        stored = await store.drafts.of("t", "t:c1", "turn-1")
        assert (stored.ids, stored.retired, len(stored.lost)) == ((), ("6",), 1)
        third = await store.drafts.posting("t", "t:c1", "turn-1", None)  # b's own
        await store.drafts.posted("t", "t:c1", "turn-1", third, "8")
        stored = await store.drafts.of("t", "t:c1", "turn-1")
        assert (stored.ids, stored.retired) == (("8",), ("6",))
        assert (await store.drafts.of("t", "t:c2", "turn-2")).ids == ("7",)  # not claimed
        known = await store.outbox.known("t", since=time.time() - 60, turn_id="turn-1")
    assert sorted(k.message_id for k in known) == ["6", "7"]


async def test_a_turn_that_is_over_posts_no_more_drafts(make_store: StoreFactory) -> None:
    """Its answer may be on its way (in a cluster, delivered by another node): a draft
    posted now would stay beside it."""
    async with make_store() as store:
        await store.journal.start_turn("turn-1", "t:c1", "chat", [])
        assert await store.drafts.posting("t", "t:c1", "turn-1", None) == 0
        await store.commit_turn(turn_id="turn-1", session_key="t:c1", replies=())
        with pytest.raises(TurnOver):
            await store.drafts.posting("t", "t:c1", "turn-1", None)
        assert len((await store.drafts.of("t", "t:c1", "turn-1")).lost) == 1


async def test_urgent_writes_go_ahead_of_the_queue(make_store: StoreFactory) -> None:
    order: list[str] = []
    started, release = threading.Event(), threading.Event()

    def blocking(conn: Connection) -> None:
        started.set()
        release.wait(10)  # the writer thread is busy: everything after this queues
        order.append("busy")

    def job(name: str) -> Callable[[Connection], None]:
        def run(conn: Connection) -> None:
            order.append(name)

        return run

    async with make_store() as store:
        busy = asyncio.ensure_future(store.db.run(blocking))
        assert await asyncio.to_thread(started.wait, 10)  # the writer runs it, alone
        normal = [asyncio.ensure_future(store.db.run(job(f"n{i}"))) for i in range(20)]
        urgent = asyncio.ensure_future(store.db.run(job("urgent"), urgent=True))
        await asyncio.sleep(0)  # (not synchronization: the new tasks queue their jobs first)
        release.set()
        await asyncio.gather(busy, urgent, *normal)
    assert order[:2] == ["busy", "urgent"]  # ahead of the twenty queued before it


async def test_a_node_that_lost_the_lead_never_marks_a_send(pg_url: str, tmp_path: Path) -> None:
    node = Membership(pg_url, "a", host="test", pid=1, interval=0.2)
    await node.start()
    try:
        await node.lead()
        async with Store(tmp_path / "unused", url=pg_url) as store:
            await store.outbox.enqueue(
                [outbound("k1", "first"), outbound("k2", "other", chat="c2")]
            )
            first, second = await store.outbox.heads("t")
            attempt = SendAttempt(time.time(), None)
            assert await store.outbox.mark_sending(first.id, attempt, fence=node.leads) is not None
            with psycopg.connect(pg_url, autocommit=True) as admin:  # its connection is cut
                admin.execute(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"  # waits
                    " WHERE application_name = 'switchboard node a'"
                )
            # before the node even noticed, the lock is gone with the connection
            assert await store.outbox.mark_sending(second.id, attempt, fence=node.leads) is None
            heads = {h.message.text: h for h in await store.outbox.heads("t")}
            assert heads["other"].state is OutboxState.PENDING  # never marked: never sent
    finally:
        await node.stop()
