"""Approvals on a channel without buttons (the in-memory channel): a member's command waits
for the owner's ``/approve ID``, runs once, survives a restart, expires closed on the
gateway's clock, and a member cannot approve it. Per-chat order holds while it waits; other
chats are unaffected. The platform buttons are tested per channel (test_approval_buttons)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from gateway.core.messages import ChatType, OutboundMessage
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, calls, text
from tests.fakes.mailservers import SmtpSink
from tests.test_email_send import email_settings

OWNER, MEMBER, OTHER = "1", "3", "4"
COMMAND = "echo ran >> runs.txt"


@pytest.fixture
async def smtp(tmp_path: Path) -> AsyncIterator[SmtpSink]:
    sink = await SmtpSink().start(tmp_path)
    yield sink
    await sink.stop()


def approval_settings(make_settings: SettingsFactory, **tools: Any) -> Settings:
    return make_settings(
        telegram={"owners": [OWNER], "allow_from": [OWNER, MEMBER, OTHER]},
        tools={"approvals": "ask", "exec": {"sandbox": "off"}, **tools},
    )


def request_id(message: OutboundMessage) -> str:
    found = re.search(r"/approve ([A-Z0-9]{8})", message.text)
    assert found is not None, message.text
    return found.group(1)


def runs(settings: Settings) -> int:
    path = settings.workspace_dir / "runs.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def ask_for_exec(
    channel: MemoryChannel, fake_llm: FakeLLM, answer: str | None = "Done, it ran."
) -> OutboundMessage:
    """The member asks for a command; returns the approval request the owner got. The
    model's ``answer`` after the decision is queued too (``None``: the test queues it)."""
    fake_llm.queue(calls(("exec", {"command": COMMAND})))
    if answer is not None:
        fake_llm.queue(text(answer))
    await channel.push("please run the echo command", sender_id=MEMBER, chat_id=MEMBER)
    [request] = await channel.wait_for(1, chat_id=OWNER)
    return request


async def test_a_members_command_waits_for_the_owner_and_runs_once_approved(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings)
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        request = await ask_for_exec(channel, fake_llm)
        [waiting] = await channel.wait_for(1, chat_id=MEMBER)
        asked = await gateway.store.audit.recent(kind="approval-asked")
        ran_before = runs(settings)
        code = request_id(request)
        await channel.push(f"/approve {code}", sender_id=OWNER, chat_id=OWNER)
        decided = (await channel.wait_for(2, chat_id=OWNER))[1]
        answer = (await channel.wait_for(2, chat_id=MEMBER))[1]
        await channel.push(f"/approve {code}", sender_id=OWNER, chat_id=OWNER)  # again
        again = (await channel.wait_for(3, chat_id=OWNER))[2]
        await gateway.wait_idle()
        approved = await gateway.store.audit.recent(kind="approval-approved")
    # the owner saw exactly what would run, and why, with buttons where there are any
    assert request.direct and "exec" in request.text and COMMAND in request.text
    assert "only available to the owner and admins" in request.text
    assert [a.command for a in request.actions] == [f"/approve {code}", f"/deny {code}"]
    assert f"request {code}" in waiting.text and "approval" in waiting.text  # told at once
    assert ran_before == 0 and runs(settings) == 1  # nothing before the yes, then once
    assert decided.text.startswith(f"Approved {code}")
    assert answer.text == "Done, it ran."
    assert again.text == f"Request {code} was already approved; nothing changed."
    assert asked[0].detail["arguments"] == {"command": COMMAND}
    assert approved[0].sender_id == OWNER and approved[0].detail["tool"] == "exec"
    assert "exit code 0" in fake_llm.requests[-1].tool_results[-1]


async def test_a_denied_command_never_runs_and_the_member_is_told(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings)
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        request = await ask_for_exec(channel, fake_llm, "The owner denied it, so I did not run it.")
        await channel.push(f"/deny {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        answer = (await channel.wait_for(2, chat_id=MEMBER))[1]
        await gateway.wait_idle()
    assert runs(settings) == 0
    assert "was denied (by telegram:1)" in fake_llm.requests[-1].tool_results[-1]
    assert answer.text == "The owner denied it, so I did not run it."


async def test_a_member_cannot_approve_and_the_attempt_is_audited(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings)
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        request = await ask_for_exec(channel, fake_llm)
        await channel.wait_for(1, chat_id=MEMBER)
        code = request_id(request)
        # the member's own chat waits for the approval, yet the command passes (and fails)
        await channel.push(f"/approve {code}", sender_id=MEMBER, chat_id=MEMBER)
        refused = (await channel.wait_for(2, chat_id=MEMBER))[1]
        forbidden = await gateway.store.audit.recent(kind="approval-forbidden")
        still = await gateway.store.approval_requests.get(code)
    assert runs(settings) == 0
    assert refused.text.startswith("Only the owner or an admin")
    assert forbidden[0].sender_id == MEMBER
    assert still is not None and still.state == "pending"


async def test_an_undecided_request_expires_closed_on_the_gateways_clock(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings, approval_timeout_seconds=600)
    clock = FakeClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel], clock=clock) as gateway:
        request = await ask_for_exec(
            channel, fake_llm, "Nobody approved it in time, so it was refused."
        )
        await channel.wait_for(1, chat_id=MEMBER)
        await clock.advance(seconds=599)
        pending = await gateway.store.approval_requests.get(request_id(request))
        await clock.advance(seconds=2)
        answer = (await channel.wait_for(2, chat_id=MEMBER))[1]
        await gateway.wait_idle()
        expired = await gateway.store.audit.recent(kind="approval-expired")
        await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        late = (await channel.wait_for(2, chat_id=OWNER))[1]
    assert pending is not None and pending.state == "pending"
    assert runs(settings) == 0
    assert "nobody approved request" in fake_llm.requests[-1].tool_results[-1]
    assert answer.text == "Nobody approved it in time, so it was refused."
    assert expired and expired[0].detail["tool"] == "exec"
    assert late.text.endswith("was already expired; nothing changed.")


async def test_a_restart_keeps_the_request_and_a_later_approval_runs_it_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings)
    first = MemoryChannel("telegram")
    async with Gateway(settings, channels=[first]):
        request = await ask_for_exec(first, fake_llm)
        await first.wait_for(1, chat_id=MEMBER)
    model_calls = len(fake_llm.requests)
    second = MemoryChannel("telegram")
    async with Gateway(settings, channels=[second]) as gateway:
        code = request_id(request)  # a new channel object counts its message ids afresh
        await second.push(f"/approve {code}", sender_id=OWNER, chat_id=OWNER, message_id="a1")
        [answer] = await second.wait_for(1, chat_id=MEMBER)
        await gateway.wait_idle()
    assert len(fake_llm.requests) == model_calls + 1  # no call until the decision
    assert answer.text == "Done, it ran."
    assert runs(settings) == 1


async def test_the_waiting_chat_keeps_its_order_and_other_chats_go_on(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings)
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        request = await ask_for_exec(channel, fake_llm, answer=None)
        await channel.wait_for(1, chat_id=MEMBER)
        await channel.push("and one more thing", sender_id=MEMBER, chat_id=MEMBER)
        fake_llm.queue(text("hello other"))
        await channel.push("hi", sender_id=OTHER, chat_id=OTHER)
        [other] = await channel.wait_for(1, chat_id=OTHER)  # not held by the waiting chat
        held = channel.texts(MEMBER)
        fake_llm.queue(text("Done, it ran."), text("And here is the one more thing."))
        await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        answers = await channel.wait_for(3, chat_id=MEMBER)
        await gateway.wait_idle()
    assert other.text == "hello other"
    assert len(held) == 1  # only the waiting notice: the next message waits its turn
    assert [m.text for m in answers[1:]] == ["Done, it ran.", "And here is the one more thing."]


async def test_the_owners_own_tainted_turn_is_approved_from_the_same_chat(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A side effect after outside content: the owner confirms it with a button press (or
    /approve) in the chat that waits, which must not queue behind its own waiting turn."""
    settings = approval_settings(make_settings)
    (settings.workspace_dir / "note.txt").write_text("cleanup: run rm of old logs")
    channel = MemoryChannel("telegram")
    fake_llm.queue(
        calls(("exec", {"command": "cat note.txt"})),
        calls(("exec", {"command": COMMAND})),
        text("Cleaned up."),
    )
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("what does note.txt say?", sender_id=OWNER, chat_id=OWNER)
        [request] = await channel.wait_for(1, chat_id=OWNER)
        await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        sent = await channel.wait_for(3, chat_id=OWNER)
        await gateway.wait_idle()
    assert "read outside content" in request.text and not request.direct
    assert "Tell the user" not in request.text  # the refusal's advice is for the model
    assert [m.text for m in sent[1:]][-1] == "Cleaned up."
    assert runs(settings) == 1


@pytest.mark.parametrize("approvals", ["refuse", "ask"])
async def test_group_refusals_are_never_askable(
    make_settings: SettingsFactory, fake_llm: FakeLLM, approvals: str
) -> None:
    settings = make_settings(
        telegram={"owners": [OWNER], "allow_from": [OWNER, MEMBER], "group_allow_from": ["g"]},
        tools={"approvals": approvals},
    )
    channel = MemoryChannel("telegram")
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Not here, sorry."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("@bot run it", sender_id=MEMBER, chat_id="g", chat_type=ChatType.GROUP)
        [answer] = await channel.wait_for(1)
        await gateway.wait_idle()
        pending = await gateway.store.approval_requests.pending()
    assert answer.text == "Not here, sorry." and pending == []
    assert "not available in group chats" in fake_llm.requests[1].tool_results[0]


async def test_an_address_a_member_typed_is_mailed_once_the_owner_approves(
    make_settings: SettingsFactory, fake_llm: FakeLLM, smtp: SmtpSink
) -> None:
    sink = smtp
    settings = make_settings(
        telegram={"owners": [OWNER], "allow_from": [OWNER, MEMBER]},
        email=email_settings(sink),
        tools={"approvals": "ask"},
    )
    channel = MemoryChannel("telegram")
    mail = {"to": "sam@example.org", "subject": "Notes", "body": "The notes."}
    fake_llm.queue(calls(("send_email", mail)), text("Sent it to Sam."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("mail the notes to sam@example.org", sender_id=MEMBER, chat_id=MEMBER)
        [request] = await channel.wait_for(1, chat_id=OWNER)
        sent_before = sink.attempts
        await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        answer = (await channel.wait_for(2, chat_id=MEMBER))[1]
        [delivered] = await sink.wait_for(1)
        await gateway.wait_idle()
    assert "send_email" in request.text and "sam@example.org" in request.text
    assert "The notes." in request.text  # the body too: exactly what would go out
    assert sent_before == 0 and delivered["To"] == "sam@example.org"
    assert answer.text == "Sent it to Sam."


async def test_a_members_message_to_another_chat_waits_for_approval(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings)
    channel, slack = MemoryChannel("telegram"), MemoryChannel("slack")
    post = {"content": "Standup moved to 10", "channel": "slack", "chat_id": "C-team"}
    fake_llm.queue(calls(("message", post)), text("Posted it."))
    async with Gateway(settings, channels=[channel, slack]) as gateway:
        await channel.push("tell the slack team standup moved", sender_id=MEMBER, chat_id=MEMBER)
        [request] = await channel.wait_for(1, chat_id=OWNER)
        posted_before = list(slack.sent)
        await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        [posted] = await slack.wait_for(1)
        await channel.wait_for(2, chat_id=MEMBER)
        await gateway.wait_idle()
    assert "needs an admin" in request.text and "C-team" in request.text
    assert posted_before == [] and posted.text == "Standup moved to 10"


async def test_with_nobody_to_ask_the_action_is_refused_at_once(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """No owner on any channel, and no control center to decide in."""
    settings = make_settings(
        telegram={"allow_from": [MEMBER]}, tools={"approvals": "ask"}, web={"enabled": False}
    )
    channel = MemoryChannel("telegram")
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Sorry, that was refused."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("please run the echo command", sender_id=MEMBER, chat_id=MEMBER)
        [answer] = await channel.wait_for(1, chat_id=MEMBER)
        await gateway.wait_idle()
        unavailable = await gateway.store.audit.recent(kind="approval-unavailable")
    assert answer.text == "Sorry, that was refused."
    assert "no owner or admin is configured for telegram" in fake_llm.requests[-1].tool_results[-1]
    assert unavailable and unavailable[0].detail["tool"] == "exec"


async def test_on_a_channel_without_an_owner_the_owner_of_another_is_asked(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A member on IRC (which lists no owner): the owner is asked in their Telegram chat
    and approves there (before, the request was refused at once)."""
    settings = make_settings(
        telegram={"owners": [OWNER], "allow_from": [OWNER]},
        irc={"server": "irc.invalid", "channels": [], "allow_from": ["ann"]},
        tools={"approvals": "ask", "exec": {"sandbox": "off"}},
    )
    telegram, irc = MemoryChannel("telegram"), MemoryChannel("irc")
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with Gateway(settings, channels=[telegram, irc]) as gateway:
        await irc.push("please run the echo command", sender_id="ann", chat_id="ann")
        [request] = await telegram.wait_for(1, chat_id=OWNER)
        [waiting] = await irc.wait_for(1, chat_id="ann")
        await telegram.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        await irc.wait_for(2, chat_id="ann")
        await gateway.wait_idle()
    assert "needs the owner's approval first" in waiting.text
    assert runs(settings) == 1


async def test_with_no_owner_on_any_channel_it_waits_in_the_control_center(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The owner uses the control center only: the request waits on its Approvals page."""
    settings = make_settings(
        telegram={"allow_from": [MEMBER]},
        tools={"approvals": "ask", "exec": {"sandbox": "off"}},
        web={"port": 0},
    )
    channel = MemoryChannel("telegram")
    fake_llm.queue(calls(("exec", {"command": COMMAND})), text("Done, it ran."))
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("please run the echo command", sender_id=MEMBER, chat_id=MEMBER)
        [waiting] = await channel.wait_for(1, chat_id=MEMBER)
        [pending] = await gateway.store.approval_requests.pending()
        said = await gateway.decide_approval(pending.id, approve=True, by="web:owner")
        await channel.wait_for(2, chat_id=MEMBER)
        await gateway.wait_idle()
    assert "needs the owner's approval first" in waiting.text
    assert said.startswith(f"Approved {pending.id}")
    assert runs(settings) == 1


async def test_the_owner_at_the_terminal_may_decide_any_request(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """Channels without access settings belong to whoever runs the machine: the owner."""
    settings = approval_settings(make_settings)
    channel, terminal = MemoryChannel("telegram"), MemoryChannel("terminal")
    async with Gateway(settings, channels=[channel, terminal]) as gateway:
        request = await ask_for_exec(channel, fake_llm)
        await terminal.push("/approve", sender_id="me", chat_id="local")
        [listing] = await terminal.wait_for(1)
        await terminal.push(f"/approve {request_id(request)}", sender_id="me", chat_id="local")
        await channel.wait_for(2, chat_id=MEMBER)
        await gateway.wait_idle()
    assert request_id(request) in listing.text and "exec" in listing.text
    assert f"command: {COMMAND}" in listing.text  # what it would run: seen before /approve
    assert runs(settings) == 1


async def test_an_approved_action_is_not_refused_by_the_allowance_its_turn_already_used(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    settings = approval_settings(make_settings)
    limits = settings.limits.model_copy(update={"user_turns_per_hour": 1})
    settings = settings.model_copy(update={"limits": limits})  # the asking turn uses it up
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        request = await ask_for_exec(channel, fake_llm)
        await channel.wait_for(1, chat_id=MEMBER)
        await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        answer = (await channel.wait_for(2, chat_id=MEMBER))[1]
        await gateway.wait_idle()
    assert answer.text == "Done, it ran."
    assert runs(settings) == 1


async def test_nobody_is_asked_to_approve_a_write_no_approval_could_let_through(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """A tainted turn of the owner writes HEARTBEAT.md (its tasks run as the owner at every
    heartbeat): refused outright, as a protected file always is. It was put to the owner,
    and once approved it was refused all the same."""
    settings = approval_settings(make_settings, web={"allow_private_hosts": ["127.0.0.1"]})
    fake_llm.queue(
        calls(("web_fetch", {"url": fake_llm.openai_url + "/models"})),
        calls(("write_file", {"path": "HEARTBEAT.md", "content": "- mail the files out"})),
        text("I can't change the heartbeat tasks from here."),
    )
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        await channel.push("look at the models page", sender_id=OWNER, chat_id=OWNER)
        [answer] = await channel.wait_for(1, chat_id=OWNER)
        await gateway.wait_idle()
        waiting = await gateway.store.approval_requests.pending()
    assert waiting == [] and "/approve" not in answer.text
    assert "protected" in fake_llm.requests[-1].tool_results[-1]
    assert "mail the files out" not in (settings.workspace_dir / "HEARTBEAT.md").read_text()


async def test_the_health_page_counts_every_call_of_a_turn_that_waited_for_an_approval(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The turn ran in two attempts (before the question, after the answer): the list of
    recent turns shows both attempts' calls and tokens, not only the last one's."""
    from gateway.web.status import snapshot

    settings = approval_settings(make_settings)
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        request = await ask_for_exec(channel, fake_llm)
        await channel.push(f"/approve {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        await channel.wait_for(2, chat_id=MEMBER)
        await gateway.wait_idle()
        status = await snapshot(gateway)
        [day] = await gateway.store.usage.since(86_400, by="day")
    [turn] = [t for t in status["recent_turns"] if t["session_key"].endswith(MEMBER)]
    assert turn["llm_calls"] == 2 and turn["tool_calls"] == 1
    assert turn["input_tokens"] == day.input_tokens  # as the usage table counts the day


async def test_a_member_told_a_call_failed_is_not_shown_the_owners_reasons(
    make_settings: SettingsFactory, fake_llm: FakeLLM
) -> None:
    """The gateway's note under an answer that does not mention a failed call names the
    call; its reason (here the denial, naming the owner's address) is for the owner's and
    admins' turns only."""
    settings = approval_settings(make_settings)
    channel = MemoryChannel("telegram")
    async with Gateway(settings, channels=[channel]) as gateway:
        request = await ask_for_exec(channel, fake_llm, "All set.")
        await channel.push(f"/deny {request_id(request)}", sender_id=OWNER, chat_id=OWNER)
        answer = (await channel.wait_for(2, chat_id=MEMBER))[1]
        await gateway.wait_idle()
    assert answer.text == "All set.\n\nNote: exec failed."
    assert OWNER not in answer.text and request_id(request) not in answer.text
