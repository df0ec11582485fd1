"""Every repository of the store behaves the same on SQLite and on PostgreSQL: history and
its full-text search, sessions, usage per day and per person, goals and notes, agent
conversations, pairing, approvals, jobs and tasks, the outbox's holds, webhook bodies."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.core.messages import ChatRef, InboundMessage, OutboundMessage
from gateway.core.schedule_spec import ScheduleSpec
from gateway.store import ApprovalRequest, Job, NewMessage, Store, TaskRecord, UsageRecord
from gateway.store.approvals import ApprovalState, approval_id
from tests.backends import StoreFactory

OWNER = {"channel": "t", "sender_id": "owner", "role": "owner"}


async def finished_turn(store: Store, session: str, turn: str, *texts: tuple[str, str]) -> None:
    await store.journal.start_turn(turn, session, "chat", [])
    await store.history.add_checkpoints(
        session, turn, [NewMessage(role, {"role": role, "content": text}) for role, text in texts]
    )
    await store.commit_turn(turn_id=turn, session_key=session, replies=[])


async def test_memory_search_finds_words_of_final_messages_in_the_given_sessions(
    make_store: StoreFactory,
) -> None:
    async with make_store() as store:
        await finished_turn(
            store,
            "t:c1",
            "turn-1",
            ("user", "The blue heron nests by the river in spring"),
            ("assistant", "Herons are patient hunters"),
        )
        await finished_turn(store, "t:c2", "turn-2", ("user", "another heron, other chat"))
        await store.journal.start_turn("turn-3", "t:c1", "chat", [])
        await store.history.add_checkpoints(
            "t:c1", "turn-3", [NewMessage("user", {"role": "user", "content": "draft heron"})]
        )
        await store.history.new_generation("t:c1")  # older generations stay searchable
        hits = await store.recall.keyword(["t:c1"], "heron", limit=8)
        none = await store.recall.keyword(["t:c1"], "?? !", limit=8)  # no words: no hits
        both = await store.recall.keyword(["t:c1", "t:c2"], 'heron OR "quoted" -minus', limit=8)
        empty = await store.recall.keyword([], "heron", limit=8)
        said = await store.recall.messages([h.message_id for h in hits])
    assert [s.role for s in said.values()] == ["user"]
    assert "[heron]" in hits[0].snippet and "river" in hits[0].snippet
    assert none == [] and empty == []
    assert sorted(h.snippet.count("[heron]") for h in both) == [1, 1]


async def test_a_search_tells_the_matching_words_from_brackets_the_person_typed(
    make_store: StoreFactory,
) -> None:
    """The control center marks the words found; "[1]" in what someone wrote is text."""
    async with make_store() as store:
        await finished_turn(
            store, "t:c1", "turn-1", ("user", "see note [1] and [heron] about the heron")
        )
        [hit] = await store.recall.keyword(["t:c1"], "heron", limit=8)
    pieces = hit.pieces()
    shown = "".join(text for text, _ in pieces)  # PostgreSQL's fragment leaves "see" out
    assert [text for text, found in pieces if found] == ["heron", "heron"]
    assert shown.endswith("note [1] and [heron] about the heron")
    assert hit.snippet.endswith("note [1] and [[heron]] about the [heron]")  # the model's


async def test_structured_and_appended_messages_are_searchable(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await store.journal.start_turn("turn-1", "t:c1", "chat", [])
        parts = [{"type": "text", "text": "a photo of the lighthouse"}]
        await store.history.add_checkpoints(
            "t:c1", "turn-1", [NewMessage("user", {"role": "user", "content": parts})]
        )
        await store.commit_turn(
            turn_id="turn-1",
            session_key="t:c1",
            replies=[],
            history_extra=[("t:c1", NewMessage("assistant", {"content": "task: lighthouse map"}))],
        )
        hits = await store.recall.keyword(["t:c1"], "lighthouse", limit=8)
        said = await store.recall.messages([h.message_id for h in hits])
        _, messages = await store.history.load("t:c1", limit=None)
    assert sorted(s.role for s in said.values()) == ["assistant", "user"]
    assert [m.role for m in messages] == ["user", "assistant"]


async def test_generations_summaries_tokens_and_dropped_messages(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await finished_turn(store, "t:c1", "turn-1", ("user", "one"), ("assistant", "two"))
        state, messages = await store.history.load("t:c1", limit=1)
        assert state.generation == 0 and [m.body["content"] for m in messages] == ["two"]
        await store.history.set_tokens([(messages[0].id, 42)])
        await store.history.set_summary("t:c1", "we counted", messages[0].id - 1)
        state, messages = await store.history.load("t:c1", limit=None)
        assert (state.summary, [m.tokens for m in messages]) == ("we counted", [42])
        assert await store.history.message_count("t:c1") == 2

        assert await store.history.new_generation("t:c1") == 1
        assert await store.history.new_generation("t:c1") == 2
        state, messages = await store.history.load("t:c1", limit=None)
        assert (state.generation, state.summary, messages) == (2, None, [])

        await store.journal.start_turn("turn-2", "t:c1", "chat", [])
        ids = await store.history.add_checkpoints(
            "t:c1", "turn-2", [NewMessage("user", {"content": "x"}), NewMessage("tool", {})]
        )
        assert [m.id for m in await store.history.checkpoints("turn-2")] == ids
        await store.history.drop(ids[1:])
        await store.commit_turn(turn_id="turn-2", session_key="t:c1", replies=[])
        _, messages = await store.history.load("t:c1", limit=None)
    assert [m.id for m in messages] == ids[:1]


async def test_a_conversation_goes_on_from_another_only_while_it_has_nothing_of_its_own(
    make_store: StoreFactory,
) -> None:
    async with make_store() as store:
        await finished_turn(store, "t:c1", "turn-1", ("user", "one"), ("assistant", "two"))
        await finished_turn(store, "t:c1", "turn-2", ("user", "three"), ("assistant", "four"))
        first = (await store.history.load("t:c1", limit=None))[1]
        await store.history.set_summary("t:c1", "we counted", first[0].id, quotes="one")
        assert await store.history.continue_from("t:c1", "person:t:1", keep=2) == 2
        state, messages = await store.history.load("person:t:1", limit=None)
        again = await store.history.continue_from("t:c1", "person:t:1", keep=2)
        hits = await store.recall.keyword(["t:c1", "person:t:1"], "three", limit=5)
        _, source = await store.history.load("t:c1", limit=None)
    assert (state.summary, state.summary_quotes) == ("we counted", "one")
    assert [m.body["content"] for m in messages] == ["three", "four"]  # the newest two, in order
    assert again == 0  # it has its own now
    assert len(hits) == 1  # found once, where it was said
    assert [m.body["content"] for m in source] == ["two", "three", "four"]  # kept


async def test_usage_per_day_per_session_and_per_person(make_store: StoreFactory) -> None:
    now = datetime.now(UTC).timestamp()
    async with make_store(clock=lambda: now) as store:
        await store.usage.record("turn-1", "t:c1", UsageRecord("t", "m", 10, 5, principal="t:u"))
        await store.usage.record("turn-1", "t:c1", UsageRecord("t", "m", 20, 6, principal="t:u"))
        await store.usage.record_call(None, "t:c2", UsageRecord("t", "m", 1, 1, purpose="summary"))
        await store.usage.record("old", "t:c1", UsageRecord("t", "m", 99, 99, at=now - 9 * 86400))
        days = await store.usage.since(86_400)
        sessions = await store.usage.since(86_400, by="session")
        today = await store.usage.tokens_today("t:c1")
        person = await store.usage.by_principal("t:u", since=now - 60, turns_since=now - 60)
    assert [(d.turns, d.input_tokens, d.output_tokens) for d in days] == [(1, 21, 7)]
    assert days[0].key == datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")  # its zone
    assert [(s.key, s.input_tokens) for s in sessions] == [("t:c1", 20), ("t:c2", 1)]
    assert today == 26  # the replaced row counts once
    assert (person.tokens, person.turns) == (26, 1)


async def test_goals_notes_and_agent_conversations(make_store: StoreFactory) -> None:
    async with make_store() as store:
        first = await store.pins.add_goal("main", "owner", "ship it")
        second = await store.pins.add_goal("main", "owner", "rest")
        assert second > first
        assert await store.pins.complete_goal("main", "owner", first) is True
        assert await store.pins.complete_goal("main", "owner", first) is False
        await store.pins.write_note("main", "owner", "plan", "v1")
        await store.pins.write_note("main", "owner", "plan", "v2")
        assert await store.pins.note("main", "owner", "plan") == "v2"
        assert [g.text for g in await store.pins.goals("main", "owner", include_done=True)] == [
            "ship it",
            "rest",
        ]
        pinned = await store.pins.pinned("main", "owner")
        assert f"[{second}] rest" in pinned and "plan" in pinned and "ship it" not in pinned
        assert await store.pins.delete_note("main", "owner", "plan") is True
        assert await store.pins.note_titles("main", "owner") == []

        origin = ChatRef("t", "c1")
        await store.agent_conversations.start("conv", origin, "main", OWNER, authorised_by=("go",))
        await store.agent_conversations.start("conv", origin, "other", {})  # kept as it was
        assert await store.agent_conversations.hop("conv") == 1
        await store.agent_conversations.taint("conv")
        conversation = await store.agent_conversations.get("conv")
    assert conversation is not None
    assert (conversation.origin_agent, conversation.hops, conversation.tainted) == ("main", 1, True)
    assert conversation.authorised_by == ("go",)


async def test_pairing_queue_keeps_the_oldest_and_decides_once(make_store: StoreFactory) -> None:
    now = [1_000.0]
    async with make_store(clock=lambda: now[0]) as store:
        codes = []
        for sender in ("a", "b", "c"):
            requested = await store.pairings.request(
                channel="t", sender_id=sender, sender_name=sender, chat_id=sender, max_pending=2
            )
            codes.append(requested.request.code if requested.request else "")
        assert codes[2] == "" and requested.oldest is not None  # full: "c" is dropped
        assert requested.oldest.sender_id == "a"
        again = await store.pairings.request(
            channel="t", sender_id="a", sender_name="", chat_id="a", max_pending=2
        )
        assert again.request is not None and again.request.code == codes[0]
        await store.pairings.decide(codes[0], "denied")
        third = await store.pairings.request(
            channel="t", sender_id="c", sender_name="", chat_id="c", max_pending=2
        )
        assert third.request is not None  # room again
        codes[2] = third.request.code
        decided = await store.pairings.decide(codes[1].lower(), "approved", channel="t")
        assert decided is not None and decided.state == "approved"
        assert await store.pairings.decide(codes[1], "denied") is None
        assert await store.pairings.is_approved("t", "b")
        cleared = await store.pairings.clear(channel=None)
        assert [r.sender_id for r in cleared] == ["c"]
        assert await store.pairings.revoke("t", "b") is True
        await store.audit.record("refused", channel="t", sender_id="x", reason="nope")
        assert await store.audit.count("refused", channel="t", sender_id="x", since=0) == 1
        [entry] = await store.audit.recent(kind="refused")
    assert entry.detail == {"reason": "nope"}


async def test_approvals_decide_once_and_jobs_tasks_keep_their_state(
    make_store: StoreFactory,
) -> None:
    record = ApprovalRequest(
        id=approval_id("turn-1:call"),
        call_key="turn-1:call",
        turn_id="turn-1",
        session_key="t:c1",
        tool="exec",
        arguments={"command": "ls"},
        fingerprint="f",
        reason="r",
        requester={"channel": "t"},
        approvers=("t:owner",),
        state=ApprovalState.PENDING,
        created_at=1.0,
        expires_at=2.0,
    )
    spec = ScheduleSpec("cron", "UTC", cron="0 9 * * *")
    async with make_store() as store:
        await store.park_turn(approval=record, messages=[], usage=[UsageRecord("t", "m", 1, 1)])
        await store.park_turn(approval=record, messages=[])  # asked again: stored once
        assert [a.id for a in await store.approval_requests.pending()] == [record.id]
        decided = await store.approval_requests.decide(
            record.id.lower(), ApprovalState.APPROVED, by="t:owner", at=3
        )
        assert decided is not None and decided.approvers == ("t:owner",)
        assert await store.approval_requests.decide(record.id, "denied", by="t:owner", at=4) is None
        assert await store.approval_requests.for_call("turn-1:call") == decided

        job = Job("j1", spec, "p", None, ChatRef("t", "c1"), OWNER, tainted=True)
        await store.jobs.add(job)
        ran = datetime(2026, 1, 1, 9, tzinfo=UTC)
        await store.jobs.record_run("j1", ran, None)
        [firing] = await store.jobs.firing()
        assert (firing.runs, firing.last_run, firing.tainted) == (1, ran, True)
        assert await store.jobs.remove("j1") is False  # firing, not active

        await store.tasks.start(TaskRecord("t1", "research", "general", job.chat, OWNER, "x"))
        assert [t.id for t in await store.tasks.running()] == ["t1"]
        assert [t.id for t in await store.tasks.interrupted()] == ["t1"]
        task = await store.tasks.get("t1")
    assert task is not None and task.state == "interrupted"


async def test_held_chats_wait_and_text_with_nul_characters_is_stored(
    make_store: StoreFactory,
) -> None:
    message = OutboundMessage(channel="t", chat_id="c1", text="a\x00b", idempotency_key="k")
    async with make_store() as store:
        await store.outbox.enqueue([message])
        await store.outbox.hold_chat("t", "t:c1", until=5e12)
        assert await store.outbox.chat_held("t", "t:c1", now=4e12)
        await store.outbox.hold_chat("t", "t:c1", until=1.0)  # never moves a hold earlier
        assert await store.outbox.chat_held("t", "t:c1", now=4e12)
        [head] = await store.outbox.heads("t")
        await store.ledger.start("turn:call", "exec")
        await store.ledger.finish("turn:call", "output\x00with a NUL")
        entry = await store.ledger.get("turn:call")
    assert head.message.text == "a\x00b"  # JSON keeps it
    assert entry is not None and entry.result is not None and "with a NUL" in entry.result


async def test_kv_and_open_counts(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await store.kv.set("last_chat", {"channel": "t", "chat_id": "c1"})
        await store.kv.set("last_chat", {"channel": "t", "chat_id": "c2"})
        assert await store.kv.get("last_chat") == {"channel": "t", "chat_id": "c2"}
        assert await store.kv.get("missing") is None
        assert await store.journal.open_count() == 0
        assert await store.journal.counts() == {}


async def test_retry_counts_attempts(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await store.journal.start_turn("turn-1", "t:c1", "chat", [])
        assert await store.journal.retry_turn("turn-1") == 2


async def test_a_tasks_states_notes_and_answer_are_numbered_events_kept_once(
    make_store: StoreFactory,
) -> None:
    target = ChatRef("telegram", "42")
    task = TaskRecord("t9", "count", "general", ChatRef("task", "t9"), OWNER, "queued")
    async with make_store() as store:
        assert await store.tasks.start(task) is True
        assert await store.tasks.start(task) is False  # the same id again: one task
        await store.journal.start_turn("turn-9", "subagent:t9", "subagent", [])
        assert await store.tasks.move("t9", "running", turn_id="turn-9") is True
        assert await store.tasks.note("t9", "halfway", key="k1") is True
        assert await store.tasks.note("t9", "halfway", key="k1") is False  # a resend
        assert await store.tasks.counts() == {"running": 1}
        assert await store.tasks.stop("t9", by="test") is True
        assert await store.tasks.finish("t9", "done", "3") is False  # stopped first
        assert [t.id for t in await store.tasks.finished_with_open_turns()] == ["t9"]
        assert (await store.journal.open_work()).running == ()  # the task's, not the dispatcher's
        events = await store.tasks.events("t9")
        later = await store.tasks.events("t9", after=2)
        other = TaskRecord(
            "u1",
            "x",
            "general",
            ChatRef("task", "u1"),
            OWNER,
            "queued",
            deliver_to=target,
            authorised_by=("x",),
            tainted=True,
        )
        await store.tasks.start(other)
        await store.tasks.finish("u1", "done", "the answer", events=False)  # an API task
        assert await store.tasks.ended("u1") is False  # its notes may still be on their way
        assert await store.tasks.record_end("u1") is True
        assert await store.tasks.record_end("u1") is False  # its last word delivered again
        ending = [(e.kind, e.text) for e in await store.tasks.events("u1", after=1)]
        stored = await store.tasks.get("u1")
        removed = await store.tasks.prune(before=4_000_000_000)
        left = await store.tasks.events("u1")
    assert [(e.seq, e.kind, e.text) for e in events] == [
        (1, "state", "queued"),
        (2, "state", "running"),
        (3, "note", "halfway"),
        (4, "state", "stopped"),
    ]
    assert [e.seq for e in later] == [3, 4]
    assert stored is not None and stored.state == "done" and stored.result == "the answer"
    assert (stored.deliver_to, stored.authorised_by, stored.tainted) == (target, ("x",), True)
    assert ending == [("answer", "the answer"), ("state", "done")]
    assert removed == 2 and left == []


async def test_tasks_are_listed_newest_first_for_their_owner_a_page_after_another(
    make_store: StoreFactory,
) -> None:
    """GET /v1/tasks's query: the owner read out of the stored JSON on either engine."""
    now = [1_000.0]
    ops = {"channel": "api", "sender_id": "ops", "role": "owner"}
    script = {"channel": "api", "sender_id": "script", "role": "member"}
    async with make_store(clock=lambda: now[0]) as store:
        for n, owner in enumerate([ops, script, ops, script, OWNER]):
            now[0] += 1
            chat = ChatRef("task", f"t{n}")
            await store.tasks.start(TaskRecord(f"t{n}", "x", "general", chat, owner, "queued"))

        async def ids(limit: int, owner: tuple[str, str] | None, after: str | None) -> list[str]:
            found = await store.tasks.recent(limit=limit, owner=owner, after=after)
            return [task.id for task in found]

        everyone = await ids(10, None, None)
        first, rest = await ids(2, None, None), await ids(10, None, "t3")
        scripts = await ids(10, ("api", "script"), None)
        later_scripts = await ids(10, ("api", "script"), "t3")
    assert everyone == ["t4", "t3", "t2", "t1", "t0"]
    assert (first, rest) == (["t4", "t3"], ["t2", "t1", "t0"])
    assert (scripts, later_scripts) == (["t3", "t1"], ["t1"])


async def test_a_webhook_body_belongs_to_its_first_delivery_until_its_claim_expires(
    make_store: StoreFactory,
) -> None:
    now = [1_000.0]
    async with make_store(clock=lambda: now[0]) as store:
        bodies = store.webhook_bodies
        assert await bodies.claim("ci", "sha256:aa", "d-1", until=1_300.0) == "d-1"
        assert await bodies.claim("ci", "sha256:aa", "d-1", until=1_310.0) == "d-1"  # retried
        assert await bodies.claim("ci", "sha256:aa", "d-2", until=1_310.0) == "d-1"  # replayed
        assert await bodies.claim("other", "sha256:aa", "d-2", until=1_310.0) == "d-2"  # per hook
        assert await bodies.claim("ci", "sha256:bb", "d-3", until=None) == "d-3"
        now[0] = 1_301.0  # the first signature's time is up: the body may come again
        assert await bodies.claim("ci", "sha256:aa", "d-4", until=1_600.0) == "d-4"
        now[0] = 1_000_000.0  # an untimed claim lasts until it is pruned
        assert await bodies.claim("ci", "sha256:bb", "d-5", until=None) == "d-3"
        assert await bodies.prune(now[0]) == 3
        assert await bodies.claim("ci", "sha256:bb", "d-5", until=None) == "d-5"


async def test_an_api_request_is_known_to_a_retry_of_it_for_its_window_only(
    make_store: StoreFactory,
) -> None:
    now = [1_000.0]
    async with make_store(clock=lambda: now[0]) as store:
        requests = store.api_requests
        await requests.remember("api:ops:me", "sha256:aa", "m1", keep=900)
        await requests.remember("api:ops:you", "sha256:aa", "m2", keep=900)
        assert await requests.find("api:ops:me", "sha256:aa") == "m1"  # per session
        assert await requests.find("api:ops:me", "sha256:bb") is None
        now[0] = 1_500.0
        await requests.remember("api:ops:me", "sha256:aa", "m3", keep=900)  # the same again
        assert await requests.find("api:ops:me", "sha256:aa") == "m3"
        now[0] = 1_950.0  # the first window is over, the latest one's is not
        assert await requests.find("api:ops:you", "sha256:aa") is None
        assert await requests.find("api:ops:me", "sha256:aa") == "m3"
        assert await requests.prune(now[0]) == 1  # the expired one
        now[0] = 2_401.0
        await requests.remember("api:ops:me", "sha256:cc", "m4", keep=900)  # forgets m3
        assert await requests.prune(now[0]) == 0


async def test_a_delivered_message_and_a_journaled_one_are_found_by_their_platform_ids(
    make_store: StoreFactory,
) -> None:
    """What a reply names by id alone: one of the bot's messages to that chat (any part of
    one sent in parts), or a message someone sent."""
    long_answer = OutboundMessage(
        channel="t", chat_id="c1", text="part one, part two", idempotency_key="a"
    )
    elsewhere = OutboundMessage(
        channel="t", chat_id="c2", text="to another chat", idempotency_key="b"
    )
    asked = InboundMessage("t", "c1", "dana", "what now?", "in-1", sender_name="Dana")
    async with make_store() as store:
        await store.outbox.enqueue([long_answer, elsewhere])
        for head, receipt in zip(
            await store.outbox.heads("t"), ("out-1,out-2", "out-3"), strict=True
        ):
            await store.outbox.mark_sent(head.id, receipt)
        await store.journal.accept(asked)
        second_part = await store.outbox.sent_as("t:c1", "out-2")
        other_chat = await store.outbox.sent_as("t:c1", "out-3")
        prefix = await store.outbox.sent_as("t:c1", "out-")
        journaled = await store.journal.message("t", "in-1")
    assert second_part is not None and second_part.text == "part one, part two"
    assert other_chat is None and prefix is None
    assert journaled is not None and (journaled.sender_name, journaled.text) == (
        "Dana",
        "what now?",
    )
