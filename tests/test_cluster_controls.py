"""A control (``/status``) on PostgreSQL is answered once. The control runs beside the
session's queue; the node must keep the session's claim until the control's reply is
committed, or the next look finds the message still pending, claims the session again and
runs the control a second time (the cluster soak saw ``/status`` answered two to four
times). A gateway in this process, the fake model."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels.memory import MemoryChannel
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory

pytestmark = pytest.mark.slow


async def test_status_is_answered_once_in_a_cluster(
    tmp_path: Path, make_settings: SettingsFactory, pg_url: str
) -> None:
    settings = make_settings(home=tmp_path / "a", storage={"url": pg_url}, node={"name": "a"})
    chats = [f"chat-{i}" for i in range(10)]
    channel = MemoryChannel()
    async with Gateway(settings, channels=[channel]):
        for chat in chats:
            await channel.push("/status", chat_id=chat, sender_id=chat)
        for chat in chats:
            await channel.wait_for(1, chat_id=chat)
            await channel.push("after", chat_id=chat, sender_id=chat)
        for chat in chats:  # the session was taken again for this: a /status left open shows
            await channel.wait_for(2, chat_id=chat)
    for chat in chats:
        texts = channel.texts(chat)
        assert len(texts) == 2 and texts[1] == "echo: after", (chat, texts)
