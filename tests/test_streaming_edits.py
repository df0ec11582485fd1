"""Answers streamed by editing on Discord and Slack: discord.py and slack_sdk against the fakes.

What a user would notice: the answer shows up while it is being written and grows in one
message that ends as the complete answer; nothing is posted twice; a turn that ends
without an answer leaves no half-written draft behind.
"""

from __future__ import annotations

from dataclasses import replace

from channels.discord.adapter import DiscordChannel
from channels.discord.connection import ReconnectPolicy
from channels.slack.adapter import SlackChannel
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.discord import FakeDiscord, dm_channel, user
from tests.fakes.llm import FakeLLM, calls, streamed, text
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, dm_event, event_body

WORDS = " ".join(f"word{i}" for i in range(39))
ANSWER = f"Here is **the answer**: {WORDS}."
OWNER = user(42, "dana", "Dana")


def discord_channel(settings_factory: SettingsFactory) -> tuple[DiscordChannel, Gateway]:
    settings = settings_factory(discord={"token": "test-token", "allow_from": ["42"]})
    policy = ReconnectPolicy(base=0.01, cap=0.05)
    channel = DiscordChannel(
        settings.discord, settings.channel_context(), policy=policy, guild_ready_timeout=0.01
    )
    return channel, Gateway(settings, channels=[channel])


def slack_gateway(settings_factory: SettingsFactory, fake_slack: FakeSlack) -> Gateway:
    settings = settings_factory(
        slack={
            "bot_token": BOT_TOKEN,
            "app_token": APP_TOKEN,
            "base_url": fake_slack.api_url,
            "allow_from": ["U42"],
        }
    )
    return Gateway(
        settings,
        channels=[SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0)],
    )


async def test_discord_edits_one_message_into_the_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=40, over=2.0))
    _, gateway = discord_channel(make_settings)
    async with gateway:
        await fake_discord.dm("tell me everything", author=OWNER)
        [draft] = await fake_discord.wait_posts(1)
        first = draft.content
        await gateway.wait_idle()
    assert ANSWER.startswith(first) and first != ANSWER  # visible while being written
    assert fake_discord.visible(dm_channel(OWNER)) == [ANSWER]  # Discord renders the markdown
    assert len(fake_discord.posted) == 1
    assert 1 <= len(fake_discord.edits) <= 5


async def test_discord_deletes_the_draft_when_the_turn_ends_without_an_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    # The model starts to talk, then says it all through the message tool: the final answer
    # repeats that message, so the turn ends without one and the draft must go.
    talk = calls(("message", {"content": "All done."}), content="Let me tell you what I did")
    fake_llm.queue(replace(talk, stream_chunks=5, chunk_delay=0.3), text("All done."))
    _, gateway = discord_channel(make_settings)
    async with gateway:
        await fake_discord.dm("do it", author=OWNER)
        [draft] = await fake_discord.wait_posts(1)
        shown = draft.content
        await gateway.wait_idle()
        await fake_discord.until(lambda: bool(fake_discord.deleted))
    assert "Let me".startswith(shown) or shown.startswith("Let me")
    assert fake_discord.visible(dm_channel(OWNER)) == ["All done."]


async def test_slack_updates_one_message_into_the_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=40, over=2.0))
    async with slack_gateway(make_settings, fake_slack) as gateway:
        await fake_slack.push(event_body(dm_event("tell me everything", user="U42", ts="1.000001")))
        [draft] = await fake_slack.wait_posts(1)
        first = draft.text
        await gateway.wait_idle()
    final = f"Here is *the answer*: {WORDS}."  # mrkdwn
    assert first != final
    assert fake_slack.visible("D0001") == [final]
    assert len(fake_slack.posted) == 1
    assert 1 <= fake_slack.count("chat.update") <= 5


def long_answer(size: int) -> str:
    """Plain prose of about ``size`` characters in numbered paragraphs."""
    count = size // 600
    return "\n\n".join(f"Paragraph {i}: " + "lorem ipsum " * 48 for i in range(count)) + (
        "\n\nThat is all."
    )


def each_paragraph_once(shown: list[str], answer: str) -> bool:
    count = answer.count("Paragraph ")
    return all(sum(t.count(f"Paragraph {i}:") for t in shown) == 1 for i in range(count))


async def test_discord_continues_a_long_answer_in_a_second_message_while_writing(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    answer = long_answer(4500)
    fake_llm.queue(streamed(answer, chunks=40, over=3.0))
    _, gateway = discord_channel(make_settings)
    async with gateway:
        await fake_discord.dm("a long one please", author=OWNER)
        await fake_discord.wait_posts(2)
        assert gateway.work_in_progress().running_turns == 1  # still writing
        await gateway.wait_idle()
    shown = fake_discord.visible(dm_channel(OWNER))
    assert len(shown) == len(fake_discord.posted) == 3  # nothing posted twice, none left over
    assert all(len(text) <= 2000 for text in shown)
    assert each_paragraph_once(shown, answer) and shown[-1].endswith("That is all.")


async def test_discord_restart_mid_answer_leaves_exactly_one_complete_answer(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    fake_llm.queue(streamed(ANSWER, chunks=60, over=6.0))
    _, gateway = discord_channel(make_settings)
    async with gateway:
        await fake_discord.dm("tell me everything", author=OWNER)
        await fake_discord.until(lambda: bool(fake_discord.edits))  # the draft is up, growing
        await gateway.stop(drain_timeout=0)  # the process goes away mid-answer
    [partial] = fake_discord.visible(dm_channel(OWNER))
    assert partial != ANSWER

    fake_llm.queue(streamed(ANSWER, chunks=10, over=0.5))
    _, gateway = discord_channel(make_settings)
    async with gateway:
        await gateway.wait_idle()
    assert fake_discord.visible(dm_channel(OWNER)) == [ANSWER]
    assert len(fake_discord.posted) == 1


async def test_slack_continues_a_long_answer_in_a_second_message_while_writing(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_slack: FakeSlack
) -> None:
    answer = long_answer(8000)
    fake_llm.queue(streamed(answer, chunks=40, over=3.0))
    async with slack_gateway(make_settings, fake_slack) as gateway:
        await fake_slack.push(event_body(dm_event("a long one", user="U42", ts="1.000001")))
        await fake_slack.wait_posts(2)
        assert gateway.work_in_progress().running_turns == 1  # still writing
        await gateway.wait_idle()
    shown = fake_slack.visible("D0001")
    assert len(shown) == len(fake_slack.posted) == 3
    assert all(len(text) <= 4000 for text in shown)  # Slack's advice for one message
    assert each_paragraph_once(shown, answer) and shown[-1].endswith("That is all.")
