"""Edits on Discord, through discord.py against the fake gateway: an edit of a message not
answered yet replaces it; a link preview added by Discord is no edit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from channels.discord.adapter import DiscordChannel
from channels.discord.connection import ReconnectPolicy
from gateway.config.settings import Settings
from gateway.runtime.app import Gateway
from tests.conftest import edit_applied
from tests.fakes.discord import (
    BOT_ID,
    BOT_USER,
    SUPPRESS_EMBEDS,
    TEXT_CHANNEL,
    FakeDiscord,
    dm_channel,
    user,
)
from tests.fakes.llm import FakeLLM, held, streamed, text

OWNER = user(42, "dana", "Dana")
DM_CHANNEL = dm_channel(OWNER)


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings(discord={"token": "test-token", "streaming": False, "allow_from": ["42"]})


async def test_an_edit_before_the_answer_replaces_the_message(
    fake_discord: FakeDiscord, fake_llm: FakeLLM, settings: Settings
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "first answered"), text("second answered"))
    policy = ReconnectPolicy(base=0.01, cap=0.05)
    channel = DiscordChannel(
        settings.discord, settings.channel_context(), policy=policy, guild_ready_timeout=0.01
    )
    async with Gateway(settings, channels=[channel]) as gateway:
        await fake_discord.dm("first", author=OWNER)
        await fake_llm.wait_for_requests(1)
        waiting = await fake_discord.dm("book a table for two", author=OWNER)
        await fake_discord.edit(
            waiting, "book a table for four", author=OWNER, channel_id=DM_CHANNEL
        )
        await edit_applied(gateway, "discord", str(waiting))
        gate.set()
        await fake_discord.wait_posts(2)
        await gateway.wait_idle()
    assert fake_discord.texts(DM_CHANNEL) == ["first answered", "second answered"]
    assert "book a table for four" in fake_llm.requests[1].last_user_text
    assert "for two" not in str(fake_llm.requests[1].body)


async def test_the_stop_button_under_a_streamed_draft_stops_the_answer(
    fake_discord: FakeDiscord, fake_llm: FakeLLM, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(discord={"token": "test-token", "allow_from": ["42"]})
    words = " ".join(f"word{i}" for i in range(200))
    fake_llm.queue(streamed(words, chunks=100, over=20))
    policy = ReconnectPolicy(base=0.01, cap=0.05)
    channel = DiscordChannel(
        settings.discord, settings.channel_context(), policy=policy, guild_ready_timeout=0.01
    )
    async with Gateway(settings, channels=[channel]) as gateway:
        await fake_discord.dm("write me something long", author=OWNER)
        [draft] = await fake_discord.wait_posts(1)
        await fake_discord.press(draft, "/stop", presser=OWNER)
        await fake_discord.until(
            lambda: any(t.startswith("Stopped.") for t in fake_discord.visible(DM_CHANNEL))
        )
        await gateway.wait_idle()
    kept, stopped = fake_discord.visible(DM_CHANNEL)
    # the draft keeps what it had written, marked, without its button; the notice follows
    assert draft.content == kept and draft.components == []
    assert kept.startswith("word0 word1 ") and kept.endswith("\n\n_Stopped before it finished._")
    assert stopped.startswith("Stopped.")


async def test_commands_are_registered_once_and_a_slash_stop_stops(
    fake_discord: FakeDiscord, fake_llm: FakeLLM, settings: Settings
) -> None:
    gate = asyncio.Event()
    fake_llm.queue(held(gate, "never delivered"))
    policy = ReconnectPolicy(base=0.01, cap=0.05)
    for _ in range(2):  # a restart: the same set is not registered again
        channel = DiscordChannel(
            settings.discord, settings.channel_context(), policy=policy, guild_ready_timeout=0.01
        )
        async with Gateway(settings, channels=[channel]) as gateway:
            await fake_discord.until(lambda: len(fake_discord.command_registrations) >= 1)
            if gate.is_set():
                continue
            await fake_discord.dm("think for a long time", author=OWNER)
            await fake_llm.wait_for_requests(1)
            await fake_discord.invoke("stop", author=OWNER, channel_id=DM_CHANNEL)
            [stopped] = await fake_discord.wait_posts(1)
            gate.set()
            await gateway.wait_idle()
    [registered] = fake_discord.command_registrations
    names = {c["name"] for c in registered}
    assert {"stop", "status", "new", "help", "model", "compact", "usage"} <= names
    assert stopped.content.startswith("Stopped.")
    [(_, note)] = [c for c in fake_discord.callbacks if c[1]["type"] == 4]
    # only the person sees that it arrived (ephemeral), and no link in it is embedded
    assert note["data"]["flags"] == 64 | SUPPRESS_EMBEDS


async def test_a_members_slash_new_in_a_channel_is_refused_and_an_admins_starts_afresh(
    fake_discord: FakeDiscord,
    fake_llm: FakeLLM,
    make_settings: Callable[..., Settings],
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin, member = OWNER, user(43, "bob", "Bob")
    settings = make_settings(
        discord={
            "token": "test-token",
            "streaming": False,
            "allow_from": ["42", "43"],
            "admins": ["42"],
            "group_allow_from": [str(TEXT_CHANNEL)],
        }
    )
    fake_llm.queue(text("noted: heron"), text("I don't know."))
    policy = ReconnectPolicy(base=0.01, cap=0.05)
    channel = DiscordChannel(
        settings.discord, settings.channel_context(), policy=policy, guild_ready_timeout=0.01
    )
    async with Gateway(settings, channels=[channel]) as gateway:
        here = {"channel_id": TEXT_CHANNEL, "guild": True}
        await fake_discord.message(
            f"<@{BOT_ID}> the code word is heron", author=member, mentions=(BOT_USER,), **here
        )
        await fake_discord.wait_posts(1)
        await fake_discord.invoke("new", author=member, **here)
        await fake_discord.wait_posts(2)
        await fake_discord.invoke("new", author=admin, **here)
        await fake_discord.wait_posts(3)
        await fake_discord.message(
            f"<@{BOT_ID}> what was the code word?", author=member, mentions=(BOT_USER,), **here
        )
        await fake_discord.wait_posts(4)
        await gateway.wait_idle()
    _, refused, fresh, _ = fake_discord.texts(TEXT_CHANNEL)
    assert refused.startswith("Only the owner or an admin can start a fresh conversation")
    assert fresh.startswith("Started a fresh conversation.")
    # a slash command's answer is a plain message, sent at the first try (not a reply to
    # the interaction, which is no message)
    failed = [
        r for r in caplog.records if r.levelno >= logging.WARNING and "send" in r.getMessage()
    ]
    assert failed == []
    [asked] = fake_llm.requests[-1].user_texts
    assert "heron" not in asked
