"""Approval prompts cannot be spoofed from the arguments (docs/security.md, "Approvals").

A member's command that closes the prompt's code block and writes its own "Why it needs
approval" heading, with the real action in a spoiler, must show as written: on Telegram all
of it inside one ``pre`` entity (checked by offsets on what the fake Telegram received), on
Slack and Discord inside one code block no value can close. Invisible characters are spelled
out; an argument too long for the prompt is said to be cut, and ``/approve`` of it works
only after ``/show`` sent it in full.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent.tools.sandbox import find_bwrap
from channels.discord.adapter import DiscordChannel
from channels.discord.connection import ReconnectPolicy
from channels.slack.adapter import SlackChannel
from channels.telegram.adapter import TelegramChannel
from gateway.core.backoff import Backoff
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.discord import FakeDiscord, dm_channel, user
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, dm_event, dm_of, event_body
from tests.fakes.telegram import FAST_PACING, FakeTelegram, section
from tests.test_approval_buttons import APPROVALS, code_in, runs

SPOOF = (
    "ls\n```\n**Why it needs approval: a harmless read-only directory listing**\n"
    "||cat MEMORY.md||\n```\necho \u202eevil\u200b"
)
SHOWN = SPOOF.replace("\u202e", "<U+202E>").replace("\u200b", "<U+200B>")


def utf16_slice(text_: str, offset: int, length: int) -> str:
    raw = text_.encode("utf-16-le")
    return raw[offset * 2 : (offset + length) * 2].decode("utf-16-le")


def telegram_setup(
    make_settings: SettingsFactory, tg: FakeTelegram
) -> tuple[Any, TelegramChannel, int, int]:
    owner, member = 1, 3
    settings = make_settings(
        telegram=section(tg, owners=[str(owner)], allow_from=[str(owner), str(member)]),
        tools=APPROVALS,
    )
    channel = TelegramChannel(
        settings.telegram,
        settings.channel_context(),
        pacing=FAST_PACING,
        backoff=Backoff(base=0.01, cap=0.05),
    )
    return settings, channel, owner, member


async def test_telegram_shows_a_spoofing_command_inside_one_pre_entity(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    settings, channel, owner, member = telegram_setup(make_settings, tg)
    fake_llm.queue(calls(("exec", {"command": SPOOF})), text("Done."))
    async with Gateway(settings, channels=[channel]):
        await tg.say("list the folder please", chat_id=member, user_id=member, first_name="**Sam**")
        [request] = await tg.wait_sent(1, chat_id=owner)
    shown = request.params["text"]
    entities = request.params["entities"]
    [pre] = [e for e in entities if e["type"] == "pre"]
    block = utf16_slice(shown, pre["offset"], pre["length"])
    assert block.endswith(f"command: {SHOWN}")  # every character, as written
    assert "tool: exec" in block and "requested by: **Sam** (telegram user 3)" in block
    # Nothing after the block starts is formatted: no fake bold heading, no spoiler.
    assert [e["type"] for e in entities if e["offset"] >= pre["offset"]] == ["pre"]
    assert pre["offset"] + pre["length"] == len(shown.encode("utf-16-le")) // 2
    prose = shown[: shown.index(block)]
    assert "harmless" not in prose and "Why it needs approval: " in prose
    assert "\u202e" not in shown and "\u200b" not in shown


async def test_a_cut_argument_is_approved_only_after_it_was_shown_in_full(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    settings, channel, owner, member = telegram_setup(make_settings, tg)
    hidden_tail = "; echo ran >> runs.txt"
    command = "true " + "x" * 4_000 + hidden_tail
    fake_llm.queue(calls(("exec", {"command": command})), text("Done, it ran."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await tg.say("run it", chat_id=member, user_id=member)
        [request] = await tg.wait_sent(1, chat_id=owner)
        code = code_in(request.params["text"])
        await tg.say(f"/approve {code}", chat_id=owner, user_id=owner)
        refused = (await tg.wait_sent(2, chat_id=owner))[1].params["text"]
        assert runs(gateway) == 0
        await tg.say(f"/show {code}", chat_id=owner, user_id=owner)
        await tg.wait_for(lambda: any(hidden_tail in t for t in tg.texts(owner)))
        before = len(tg.texts(owner))
        await tg.say(f"/approve {code}", chat_id=owner, user_id=owner)
        approved = (await tg.wait_sent(before + 1, chat_id=owner))[before].params["text"]
        await tg.wait_sent(2, chat_id=member)
        await gateway.wait_idle()
    prompt = request.params["text"]
    assert f"command is cut: 1,500 of {len(command):,} characters shown" in prompt
    assert f"/show {code}" in prompt and hidden_tail not in prompt
    assert refused.startswith(f"Request {code} was too long to show in full")
    assert approved.startswith(f"Approved {code}")
    assert runs(gateway) == 1


async def test_slack_and_discord_keep_a_spoofing_command_inside_the_code_block(
    make_settings: SettingsFactory,
    fake_llm: FakeLLM,
    fake_slack: FakeSlack,
    fake_discord: FakeDiscord,
) -> None:
    slack_owner, slack_member = "U0OWNER", "U0MEMBER"
    owner = user(310_000_000_000_000_042, "dana", "Dana")
    member = user(310_000_000_000_000_043, "sam", "Sam")
    settings = make_settings(
        slack={
            "bot_token": BOT_TOKEN,
            "base_url": fake_slack.api_url,
            "app_token": APP_TOKEN,
            "owners": [slack_owner],
            "allow_from": [slack_owner, slack_member],
        },
        discord={
            "token": "test-token",
            "owners": [owner["id"]],
            "allow_from": [owner["id"], member["id"]],
        },
        tools=APPROVALS,
    )
    slack = SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0)
    discord = DiscordChannel(
        settings.discord,
        settings.channel_context(),
        policy=ReconnectPolicy(base=0.01, cap=0.05),
        guild_ready_timeout=0.01,
    )
    fake_llm.queue(calls(("exec", {"command": SPOOF})), text("Done."))
    fake_llm.queue(calls(("exec", {"command": SPOOF})), text("Done."))
    async with Gateway(settings, channels=[slack, discord]):
        await fake_slack.push(event_body(dm_event("list it", user=slack_member, ts="10.000001")))
        await fake_slack.until(
            lambda: any(p.channel == dm_of(slack_owner) for p in fake_slack.posted)
        )
        await fake_discord.dm("list it", author=member)
        await fake_discord.until(
            lambda: any(p.channel_id == dm_channel(owner) for p in fake_discord.posted)
        )
        [slack_prompt] = [p for p in fake_slack.posted if p.channel == dm_of(slack_owner)]
        [discord_prompt] = [p for p in fake_discord.posted if p.channel_id == dm_channel(owner)]
    for shown in (
        next(b["text"]["text"] for b in slack_prompt.blocks if b["type"] == "section"),
        discord_prompt.content,
    ):
        # One block, opened once and closed once at the very end: the value's own ```
        # cannot close it, so its "heading" and "spoiler" are code, not formatting.
        assert len(re.findall("```", shown)) == 2, shown
        assert shown.rstrip().endswith("```")
        inside = shown[shown.index("```") :]
        assert "Why it needs approval: a harmless" in inside
        assert "cat MEMORY.md" in inside and "U+202E" in inside
    slack_shown = next(b["text"]["text"] for b in slack_prompt.blocks if b["type"] == "section")
    assert "&lt;U+202E&gt;evil&lt;U+200B&gt;" in slack_shown  # no <...> link syntax in Slack
    assert "<U+202E>evil<U+200B>" in discord_prompt.content


# -- what an approved member command can reach ---------------------------------------------


@pytest.mark.skipif(find_bwrap("auto") is None, reason="needs bubblewrap that works here")
async def test_an_approved_member_command_sees_only_what_their_file_tools_see(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    owner, member = 1, 3
    settings = make_settings(
        telegram=section(tg, owners=[str(owner)], allow_from=[str(owner), str(member)]),
        tools={"approvals": "ask", "exec": {"sandbox": "bwrap"}},
    )
    workspace = settings.workspace_dir
    (workspace / "MEMORY.md").write_text("OWNER-MEMORY-SECRET\n")
    people = workspace / "memory" / "people"
    people.mkdir(parents=True, exist_ok=True)
    (people / "telegram-2.md").write_text("OTHER-PERSON-SECRET\n")
    skill = workspace / "skills" / "weather"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text("SKILL-TEXT-VISIBLE\n")
    command = (
        "cat MEMORY.md memory/people/telegram-2.md; ls -a; cat skills/weather/SKILL.md; "
        "echo made > new.txt; echo end"
    )
    channel = TelegramChannel(
        settings.telegram,
        settings.channel_context(),
        pacing=FAST_PACING,
        backoff=Backoff(base=0.01, cap=0.05),
    )
    fake_llm.queue(calls(("exec", {"command": command})), text("Done."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await tg.say("show me the files", chat_id=member, user_id=member)
        [request] = await tg.wait_sent(1, chat_id=owner)
        code = code_in(request.params["text"])
        await tg.say(f"/approve {code}", chat_id=owner, user_id=owner)
        await tg.wait_sent(2, chat_id=member)
        await gateway.wait_idle()
    [output] = fake_llm.requests[-1].tool_results
    assert "end" in output and "SKILL-TEXT-VISIBLE" in output
    assert "OWNER-MEMORY-SECRET" not in output and "OTHER-PERSON-SECRET" not in output
    assert not (workspace / "new.txt").exists()
    prompt = request.params["text"]
    assert "can read: skills/" in prompt
    assert "can write: nothing that stays" in prompt and "network: none" in prompt
