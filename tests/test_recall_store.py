"""The recall index in the store, the same on SQLite and PostgreSQL: whose conversation each
session is, who spoke in a group, the queue of messages waiting for their vectors, the
vectors themselves, and where memory entries came from."""

from __future__ import annotations

import struct

from gateway.store import NewMessage, Origin, Store
from tests.backends import StoreFactory


async def finished_turn(
    store: Store,
    session: str,
    turn: str,
    *texts: tuple[str, str],
    scope: str | None = None,
    member: str | None = None,
) -> None:
    await store.journal.start_turn(turn, session, "chat", [])
    await store.history.add_checkpoints(
        session, turn, [NewMessage(role, {"role": role, "content": text}) for role, text in texts]
    )
    await store.commit_turn(
        turn_id=turn, session_key=session, replies=[], scope=scope, member=member
    )


async def test_a_search_sees_only_the_sessions_of_its_scopes(make_store: StoreFactory) -> None:
    async with make_store() as store:
        await finished_turn(
            store,
            "t:ann",
            "turn-1",
            ("user", "The blue heron nests by the river in spring"),
            ("assistant", "Herons are patient hunters"),
            scope="main|person:t:ann",
        )
        await finished_turn(
            store, "t:bob", "turn-2", ("user", "another heron"), scope="main|person:t:bob"
        )
        await finished_turn(
            store,
            "t:g",
            "turn-3",
            ("user", "[Ann] a heron in the group"),
            scope="main|group:t:g",
            member="t:ann",
        )
        await finished_turn(store, "t:old", "turn-4", ("user", "heron before scopes existed"))
        await finished_turn(
            store, "helper/t:ann", "turn-5", ("user", "heron, other agent"), scope="helper|x"
        )
        groups = await store.recall.member_scopes("t:ann", "main|")
        ann = await store.recall.sessions(["main|person:t:ann", *groups], also="t:old")
        everything = await store.recall.sessions([], prefix="main|")
        hits = await store.recall.keyword(list(ann), "heron", limit=10)
        none = await store.recall.keyword(list(ann), "?? !", limit=10)  # no words: no error
        said = await store.recall.messages([h.message_id for h in hits])
    assert groups == ["main|group:t:g"]
    assert ann == {"t:ann": "main|person:t:ann", "t:g": "main|group:t:g", "t:old": None}
    assert set(everything) == {"t:ann", "t:bob", "t:g"}
    assert {said[h.message_id].session_key for h in hits} == {"t:ann", "t:g", "t:old"}
    assert all("[heron]" in h.snippet or "[Herons]" in h.snippet for h in hits)
    assert none == []
    roles = sorted((s.session_key, s.role) for s in said.values())
    assert roles == [("t:ann", "user"), ("t:g", "user"), ("t:old", "user")]


async def test_the_queue_holds_each_searchable_message_until_its_vector_is_stored(
    make_store: StoreFactory,
) -> None:
    vector = struct.pack("<3f", 1.0, 0.0, 0.0)
    async with make_store() as store:
        await store.recall.use_model("m1")
        await finished_turn(
            store, "t:a", "turn-1", ("user", "one"), ("assistant", "two"), scope="main|owner"
        )
        await store.journal.start_turn("turn-2", "t:a", "chat", [])
        await store.history.add_checkpoints(  # a tool call and its result are no conversation
            "t:a",
            "turn-2",
            [
                NewMessage("user", {"role": "user", "content": "three"}),
                NewMessage("assistant", {"role": "assistant", "content": ""}),
                NewMessage("tool", {"role": "tool", "content": "noise"}),
            ],
        )
        await store.commit_turn(turn_id="turn-2", session_key="t:a", replies=[])
        queued = await store.recall.queued(10)
        first, rest = queued[:2], queued[2:]
        await store.recall.store_vectors(
            "m1", [(s, vector) for s in first], [s.message_id for s in first]
        )
        await store.recall.store_vectors(  # done again (a crash after the commit): no copy
            "m1", [(s, vector) for s in first], [s.message_id for s in first]
        )
        left = await store.recall.queued(10)
        stored = await store.recall.vectors_after(0, "m1", 10)
        later = await store.recall.vectors_after(stored[0].seq, "m1", 10)
        unchanged = await store.recall.use_model("m1")
        switched = await store.recall.use_model("m2")
        requeued = await store.recall.queued(10)
        kept = await store.recall.vectors_after(0, "m1", 10)
    assert [s.text for s in queued] == ["one", "two", "three"]
    assert [s.role for s in queued] == ["user", "assistant", "user"]
    assert [s.message_id for s in left] == [s.message_id for s in rest]
    assert [v.message_id for v in stored] == [s.message_id for s in first]
    assert stored[0].vector == vector and stored[0].session_key == "t:a"
    assert [v.message_id for v in later] == [first[1].message_id]
    assert (unchanged, switched) == (False, True)
    assert [s.text for s in requeued] == ["one", "two", "three"]  # every one, for the new model
    assert kept == []


async def test_history_from_before_recall_is_queued_once_a_model_is_chosen(
    make_store: StoreFactory,
) -> None:
    async with make_store() as store:
        await finished_turn(store, "t:a", "turn-1", ("user", "from long ago"))
        await store.db.run(lambda conn: conn.execute("DELETE FROM recall_queue"))
        await store.recall.use_model("m1")
        queued = await store.recall.queued(10)
        backlog = await store.recall.backlog()
    assert [s.text for s in queued] == ["from long ago"] and backlog == 1


async def test_memory_entries_remember_where_they_came_from(make_store: StoreFactory) -> None:
    origin = Origin("t:ann", "t", "ann", "turn-1", 1_700_000_000.0, outside=True)
    later = Origin("t:bob", "t", "g", "turn-2", 1_700_000_100.0, outside=False)
    async with make_store() as store:
        await store.memory_entries.record("main", "MEMORY.md", ["- likes tea", ""], origin)
        await store.memory_entries.record("main", "MEMORY.md", ["- likes tea  "], later)
        found = await store.memory_entries.origins(
            "main", [("MEMORY.md", "- likes tea"), ("MEMORY.md", "- by hand")]
        )
        other_agent = await store.memory_entries.origins("x", [("MEMORY.md", "- likes tea")])
    assert found == {("MEMORY.md", "- likes tea"): origin}
    assert other_agent == {}
