"""Streamed drafts of a turn that moved to another node. A streamed answer resumed on another
node after its first attempt failed to commit (the database restarted under it): the
answer's delivery finishes the drafts the resumed attempt posted, even on the node whose own
failed attempt it remembers, so the chat shows one complete answer and no draft above it. A
node cut off by the server while it streams (a zombie: it lives, and edits its draft until
it notices): the answer never goes into the draft it edits, so its late edits cannot
overwrite the answer. PostgreSQL, the fake Telegram Bot API."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from gateway.config.settings import Settings
from gateway.core.messages import ChatRef, OutboundMessage
from gateway.core.turns import TurnKind
from gateway.runtime.app import Gateway
from gateway.runtime.outbound.drafts import DraftStreamer
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, streamed, text
from tests.fakes.telegram import FakeTelegram, fast_channel
from tests.test_cluster_fencing import cut_off, until
from tests.test_streaming import streaming_on

pytestmark = pytest.mark.slow

CHAT = ChatRef("telegram", "42")
TURN = "turn-resumed-elsewhere"
ANSWER = "echo: 25 hello there"


async def test_an_answer_resumed_on_another_node_finishes_that_nodes_draft(
    make_settings: SettingsFactory, tg: FakeTelegram, pg_url: str
) -> None:
    settings = make_settings(storage={"url": pg_url}, node={"name": "a"}, telegram=streaming_on(tg))
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        store = gateway.store
        await store.journal.start_turn(TURN, CHAT.session_key, TurnKind.CHAT, [])

        # Node a's attempt: its first words, then its commit fails (the database went down),
        # so its draft stays remembered here, uncommitted and with no post of its own.
        sinks = gateway.drafts.sinks(CHAT, TURN, group=False, reply_to=None, fresh=True)
        assert sinks is not None
        await sinks[0]("echo: 25 ")
        await gateway.drafts.settle(CHAT, TURN)

        # Node b resumes the turn: it streams into a draft message of its own and commits.
        other = DraftStreamer(gateway.channels, store.drafts, enabled=lambda channel, group: True)
        resumed = other.sinks(CHAT, TURN, group=False, reply_to=None, fresh=False)
        assert resumed is not None
        await resumed[0]("echo: 25 ")
        await resumed[0]("hello")
        await tg.wait_sent(1)  # b's draft is posted (and recorded)
        await other.turn_ended(CHAT, TURN, answered=True)
        await store.outbox.enqueue([OutboundMessage("telegram", "42", ANSWER, turn_id=TURN)])

        # a leads, so a delivers the answer: into b's draft, not as a second message
        await tg.wait_for(lambda: ANSWER in tg.visible(42))
        await gateway.wait_idle()
    assert tg.visible(42) == [ANSWER]
    assert len(tg.sent(42)) == 1


ZOMBIE_WORDS = "words of the first node, still on their way when it lost the session"
FINAL = "the complete answer of the node that took over"


async def test_a_cut_off_nodes_late_draft_edit_cannot_overwrite_the_answer(
    *,
    tmp_path: Path,
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    tg: FakeTelegram,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def node(name: str) -> Settings:
        return make_settings(
            home=tmp_path / name,
            storage={"url": pg_url},
            node={"name": name},
            telegram=streaming_on(tg),
        )

    writing = asyncio.Event()
    # a's model writes four pieces, half a second apart, then stops until the test lets it
    # go on: its draft is posted with the first two, and edited a second later with more.
    # b's resumed turn answers at once (nothing streamed).
    fake_llm.queue(
        replace(streamed(ZOMBIE_WORDS, chunks=8, over=3.5), gate=writing, pause_after=4),
        text(FINAL),
    )
    # that edit is slow on the wire: it reaches Telegram only when the test lets it go
    on_the_wire = tg.hold("editMessageText", deliver=True, late=True, chat_id=42)
    settings_a, settings_b = node("a"), node("b")
    async with Gateway(settings_a, channels=[fast_channel(settings_a)]) as a:
        await tg.say("tell me")
        [draft] = await tg.wait_sent(1)  # a runs the turn: its draft is posted and recorded
        assert ZOMBIE_WORDS.startswith(draft.params["text"])
        await asyncio.wait_for(on_the_wire.arrived.wait(), 10)  # a's edit is on its way
        # b as on another host: the Telegram token's lock is per host, and a, cut off but
        # alive, keeps its receiver until it notices
        (tmp_path / "host-b").mkdir()
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "host-b"))
        b = Gateway(settings_b, channels=[fast_channel(settings_b)])
        joining = asyncio.create_task(b.start())
        try:
            await asyncio.wait_for(b.guard.standby.wait(), 10)
            admin = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
            try:
                await cut_off(admin, "a")  # alive, its turn still running
                await asyncio.wait_for(joining, 15)  # b leads
                # b claims the session, resumes the turn, commits and delivers the answer
                await tg.wait_for(lambda: tg.visible(42) == [FINAL], timeout=20)
                await b.wait_idle()
                on_the_wire.release()  # a's edit arrives: before, into the answer's message
                writing.set()  # a's model ends its words; a's turn cannot commit them
                await until(a, lambda: not a.load.sessions, 15)
            finally:
                await admin.close()
        finally:
            joining.cancel()
            await asyncio.gather(joining, return_exceptions=True)
            await b.stop()
    assert tg.visible(42) == [FINAL]  # the answer, whole, and nothing of a's words
    assert len(fake_llm.requests) == 2


async def streaming(gateway: Gateway, *pieces: str, fresh: bool) -> DraftStreamer:
    """A node's attempt at TURN streaming ``pieces`` (``fresh``: its first attempt)."""
    streamer = DraftStreamer(
        gateway.channels, gateway.store.drafts, enabled=lambda channel, group: True
    )
    sinks = streamer.sinks(CHAT, TURN, group=False, reply_to=None, fresh=fresh)
    assert sinks is not None
    for piece in pieces:
        await sinks[0](piece)
    return streamer


async def test_a_turn_resumed_under_a_new_claim_streams_apart_from_the_old_draft(
    make_settings: SettingsFactory, tg: FakeTelegram, pg_url: str
) -> None:
    """The node that took the session over posts a draft of its own, never edits the one
    the earlier claim posted, and the answer finishes its draft; the old one is deleted."""
    settings = make_settings(storage={"url": pg_url}, node={"name": "a"}, telegram=streaming_on(tg))
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        store = gateway.store
        await store.journal.start_turn(TURN, CHAT.session_key, TurnKind.CHAT, [])
        await store.journal.session_work(CHAT.session_key, (), claim_by="x")

        # Node x's attempt: its draft is posted, then another node claims the session.
        first = await streaming(gateway, "echo: 25 ", "hel", fresh=True)
        [old] = await tg.wait_sent(1)
        await first.settle(CHAT, TURN)  # its post recorded (its late edits: the test above)
        await store.journal.session_work(CHAT.session_key, (), claim_by="y")

        # Node y resumes the turn: its words go into a draft message of its own.
        other = await streaming(gateway, "echo: 25 ", "hello", fresh=False)
        [_, new] = await tg.wait_sent(2)
        await other.turn_ended(CHAT, TURN, answered=True)
        await store.outbox.enqueue([OutboundMessage("telegram", "42", ANSWER, turn_id=TURN)])

        await tg.wait_for(lambda: tg.visible(42) == [ANSWER])
        await gateway.wait_idle()
    edited = {c.params["message_id"] for c in tg.called("editMessageText")}
    assert edited == {new.result["message_id"]}  # the old draft was never edited
    assert [c.params["message_id"] for c in tg.called("deleteMessage")] == [
        old.result["message_id"]
    ]
