"""A streamed answer resumed on another node after its first attempt failed to commit (the
database restarted under it): the answer's delivery finishes the drafts the resumed attempt
posted, even on the node whose own failed attempt it remembers, so the chat shows one
complete answer and no draft above it. PostgreSQL, the fake Telegram Bot API; the node that
resumed the turn is a second draft streamer on the same database and channel."""

from __future__ import annotations

import pytest

from gateway.core.messages import ChatRef, OutboundMessage
from gateway.core.turns import TurnKind
from gateway.runtime.app import Gateway
from gateway.runtime.drafts import DraftStreamer
from tests.conftest import SettingsFactory
from tests.fakes.telegram import FakeTelegram, fast_channel
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
