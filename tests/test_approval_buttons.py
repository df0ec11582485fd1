"""Approval buttons on the platforms that have them, with the real client libraries against
the fakes: python-telegram-bot (inline keyboard, callback queries), slack-bolt (blocks,
signed ``block_actions``), discord.py (components, ``INTERACTION_CREATE``). A member's
command produces a request with buttons in the owner's DM; the owner's press runs it once;
a press by the member does nothing but get audited."""

from __future__ import annotations

import html
import re
import time
from typing import Any

import aiohttp
import openai
import pytest

from channels.discord.adapter import DiscordChannel
from channels.discord.connection import ReconnectPolicy
from channels.hooks.signature import sign
from channels.slack.adapter import SlackChannel
from channels.telegram.adapter import TelegramChannel
from gateway.core.backoff import Backoff
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.discord import FakeDiscord, dm_channel, user
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    SIGNING_SECRET,
    FakeSlack,
    Posted,
    block_actions,
    dm_event,
    dm_of,
    event_body,
    post_action,
    post_signed,
)
from tests.fakes.telegram import FAST_PACING, FakeTelegram, fast_channel, section

COMMAND = "echo ran >> runs.txt"
APPROVALS = {"approvals": "ask", "exec": {"sandbox": "off"}}


def runs(gateway: Gateway) -> int:
    path = gateway.settings.workspace_dir / "runs.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def code_in(text_: str) -> str:
    found = re.search(r"/approve ([A-Z0-9]{8})", text_)
    assert found is not None, text_
    return found.group(1)


# -- Telegram ---------------------------------------------------------------------------


async def test_telegram_owner_taps_approve_and_the_members_command_runs_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
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
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await tg.say("please run the echo command", chat_id=member, user_id=member)
        [request] = await tg.wait_sent(1, chat_id=owner)
        [waiting] = await tg.wait_sent(1, chat_id=member)
        code = code_in(request.params["text"])
        keyboard = request.params["reply_markup"]["inline_keyboard"]
        # the member taps the button (as if they had it): nothing runs, they are told
        await tg.press(request, f"/approve {code}", user_id=member)
        refused = (await tg.wait_sent(2, chat_id=owner))[1]
        forbidden = await gateway.store.audit.recent(kind="approval-forbidden")
        runs_after_member = runs(gateway)
        # the owner taps it: it runs, once, and the member gets the answer
        await tg.press(request, f"/approve {code}", user_id=owner, first_name="Owner")
        answer = (await tg.wait_sent(2, chat_id=member))[1]
        await tg.wait_called("editMessageReplyMarkup")
        answered = await tg.wait_called("answerCallbackQuery", 2)
        await gateway.wait_idle()
    assert [[b["text"] for b in row] for row in keyboard] == [["Approve", "Deny"]]
    assert [b["callback_data"] for b in keyboard[0]] == [f"/approve {code}", f"/deny {code}"]
    assert COMMAND in request.params["text"] and "exec" in request.params["text"]
    assert f"request {code}" in waiting.params["text"]
    assert refused.params["text"].startswith("Only the owner or an admin")
    assert forbidden and forbidden[0].sender_id == str(member)
    assert runs_after_member == 0 and runs(gateway) == 1
    assert answer.params["text"] == "Done, it ran."
    [removed] = tg.called("editMessageReplyMarkup")  # only the owner's own tap
    assert removed.params["message_id"] == request.result["message_id"]
    assert len(answered) == 2  # every tap stops its spinner


async def test_a_webhooks_and_a_member_tokens_requests_reach_the_owner_whose_tap_decides(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tg: FakeTelegram
) -> None:
    """Dogfood 9: a webhook turn's request reached the owner's Telegram with buttons, and
    the owner's tap was answered "Only the owner or an admin ..." (its approvers were
    "hook:*"); a member API token was sent the approver's prompt itself, and nobody on
    Telegram heard of it. Neither has an owner of its own: the owners of the chat channels
    are asked, their tap decides, and the member token is told that it waits."""
    owner = 42
    secret = "hook-secret-0123456789abcdef"
    member_token = "member-token-0123456789abcdef"
    settings = make_settings(
        telegram=section(tg, owners=[str(owner)]),
        tools=APPROVALS,
        web={"port": 0},
        hooks={"ci": {"secret": secret, "deliver_to": f"telegram:{owner}"}},
        api={"enabled": True, "tokens": [{"name": "script", "token": member_token}]},
    )
    fake_llm.queue(
        calls(("exec", {"command": COMMAND})),
        text("Done for the webhook."),
        calls(("exec", {"command": COMMAND})),
        text("Done for the script."),
    )
    body = b'{"event": "deploy"}'
    headers = {
        "Content-Type": "application/json",
        "X-Switchboard-Signature": sign(secret, body, "d-1", int(time.time())),
        "X-Switchboard-Delivery": "d-1",
    }
    async with Gateway(settings, channels=[fast_channel(settings)]) as gateway:
        assert gateway.web is not None
        hook = gateway.web.url + "hooks/ci"
        async with (
            aiohttp.ClientSession() as http,
            http.post(hook, data=body, headers=headers) as r,
        ):
            assert r.status == 202
        [hooks_request] = await tg.wait_sent(1, chat_id=owner)
        await tg.press(
            hooks_request, f"/approve {code_in(hooks_request.params['text'])}", user_id=owner
        )
        for_the_hook = (await tg.wait_sent(3, chat_id=owner))[1:]
        await gateway.wait_idle()
        client = openai.AsyncOpenAI(
            base_url=gateway.web.url + "v1", api_key=member_token, max_retries=0
        )
        async with client:
            waiting = await client.chat.completions.create(
                model="main", messages=[{"role": "user", "content": "run the echo command"}]
            )
        members_request = (await tg.wait_sent(4, chat_id=owner))[3]
        await tg.press(
            members_request, f"/approve {code_in(members_request.params['text'])}", user_id=owner
        )
        await tg.wait_sent(5, chat_id=owner)  # the owner is told it runs
        await gateway.wait_idle()
        _, history = await gateway.store.history.load("api:script", limit=10)
    approved, answered = sorted(m.params["text"] for m in for_the_hook)
    assert approved.startswith(f"Approved {code_in(hooks_request.params['text'])}: exec runs")
    assert answered == "Done for the webhook."
    told = waiting.choices[0].message.content or ""
    assert "needs the owner's approval first" in told and "/approve" not in told
    assert "exec" in members_request.params["text"] and members_request.params["reply_markup"]
    assert runs(gateway) == 2
    assert history[-1].body["content"] == "Done for the script."


# -- Slack ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_slack_owner_presses_approve_and_the_members_command_runs_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_slack: FakeSlack, mode: str
) -> None:
    owner, member = "U0OWNER", "U0MEMBER"
    access = {"owners": [owner], "allow_from": [owner, member]}
    wire: dict[str, Any] = (
        {"signing_secret": SIGNING_SECRET, "http_port": 0}
        if mode == "http"
        else {"app_token": APP_TOKEN}
    )
    settings = make_settings(
        slack={"bot_token": BOT_TOKEN, "base_url": fake_slack.api_url, **access, **wire},
        tools=APPROVALS,
    )
    channel = SlackChannel(settings.slack, settings.channel_context(), ping_interval=1.0)
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with Gateway(settings, channels=[channel]) as gateway:
        url = f"http://127.0.0.1:{channel.port}/slack/events"

        async def press(posted: Posted, value: str, user: str, *, in_chat: str = "") -> None:
            payload = block_actions(posted, value, user=user)
            if in_chat:  # a press that claims another chat (Slack would not send one)
                payload["channel"]["id"] = payload["container"]["channel_id"] = in_chat
            if mode == "http":
                assert await post_action(url, payload) == 200  # acknowledged once journaled
            else:
                await fake_slack.wait_ack(await fake_slack.push_interactive(payload))

        event = dm_event("please run the echo command", user=member, ts="10.000001")
        if mode == "http":
            await post_signed(url, event_body(event))
        else:
            await fake_slack.push(event_body(event))
        await fake_slack.until(lambda: len(fake_slack.posted) >= 2)
        [request] = [p for p in fake_slack.posted if p.channel == dm_of(owner)]
        [waiting] = [p for p in fake_slack.posted if p.channel == "D0001"]
        code = code_in(request.text)
        offered = [b for b in request.blocks if b["type"] == "actions"]
        await press(request, f"/approve {code}", member, in_chat="D0001")  # not theirs
        await fake_slack.until(lambda: len(fake_slack.texts("D0001")) >= 2)
        runs_after_member = runs(gateway)
        await press(request, f"/approve {code}", owner)
        await fake_slack.until(lambda: "Done, it ran." in fake_slack.texts("D0001"))
        await gateway.wait_idle()
        forbidden = await gateway.store.audit.recent(kind="approval-forbidden")
    [actions] = offered
    assert [(e["text"]["text"], e["value"]) for e in actions["elements"]] == [
        ("Approve", f"/approve {code}"),
        ("Deny", f"/deny {code}"),
    ]
    sections = [html.unescape(b["text"]["text"]) for b in request.blocks if b["type"] == "section"]
    assert any(COMMAND in section for section in sections)  # shown as written (escaped: >>)
    assert f"request {code}" in waiting.text
    assert forbidden and forbidden[0].sender_id == member
    assert runs_after_member == 0 and runs(gateway) == 1
    assert fake_slack.texts("D0001")[1].startswith("Only the owner or an admin")
    assert fake_slack.texts(dm_of(owner))[1].startswith(f"Approved {code}")
    assert [b["type"] for b in request.blocks] == ["section"]  # the buttons are off


# -- Discord ----------------------------------------------------------------------------


async def test_discord_owner_presses_approve_and_the_members_command_runs_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM, fake_discord: FakeDiscord
) -> None:
    owner = user(310_000_000_000_000_042, "dana", "Dana")
    member = user(310_000_000_000_000_043, "sam", "Sam")
    ids = [owner["id"], member["id"]]
    settings = make_settings(
        discord={"token": "test-token", "owners": [owner["id"]], "allow_from": ids},
        tools=APPROVALS,
    )
    channel = DiscordChannel(
        settings.discord,
        settings.channel_context(),
        policy=ReconnectPolicy(base=0.01, cap=0.05),
        guild_ready_timeout=0.01,
    )
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await fake_discord.dm("please run the echo command", author=member)
        await fake_discord.until(lambda: len(fake_discord.posted) >= 2)
        [request] = [p for p in fake_discord.posted if p.channel_id == dm_channel(owner)]
        [waiting] = [p for p in fake_discord.posted if p.channel_id == dm_channel(member)]
        code = code_in(request.content)
        pressed = await fake_discord.press(request, f"/approve {code}", presser=member)
        await fake_discord.until(lambda: len(fake_discord.texts(dm_channel(owner))) >= 2)
        runs_after_member = runs(gateway)
        await fake_discord.press(request, f"/approve {code}", presser=owner)
        await fake_discord.until(lambda: "Done, it ran." in fake_discord.texts(dm_channel(member)))
        await fake_discord.until(lambda: len(fake_discord.callbacks) == 2)
        await gateway.wait_idle()
        forbidden = await gateway.store.audit.recent(kind="approval-forbidden")
    [row] = request.components
    assert [(b["label"], b["custom_id"]) for b in row["components"]] == [
        ("Approve", f"/approve {code}"),
        ("Deny", f"/deny {code}"),
    ]
    assert COMMAND in request.content and f"request {code}" in waiting.content
    assert forbidden and forbidden[0].sender_id == member["id"]
    assert runs_after_member == 0 and runs(gateway) == 1
    assert fake_discord.texts(dm_channel(owner))[2].startswith(f"Approved {code}")
    # every press is answered; the owner's own takes the buttons off
    assert [(i == pressed, body["type"]) for i, body in fake_discord.callbacks] == [
        (True, 6),
        (False, 7),
    ]
    assert fake_discord.callbacks[1][1]["data"]["components"] == []
