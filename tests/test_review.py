"""The review never throws a substantive answer away: what failed is added by the gateway,
re-prompts happen only where they help, and a member's list_dir shows what they may see."""

from __future__ import annotations

from typing import Any

from channels.memory import MemoryChannel
from gateway.core.messages import Attachment, OutboundKind
from tests.fakes.llm import FakeLLM, calls, text

TELEGRAM = {"telegram": {"owners": ["1"], "allow_from": ["1", "3"]}}


async def test_an_answer_that_skips_a_failed_tool_is_kept_with_a_note(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    reads = [("read_file", {"path": "AGENTS.md"})]
    reads += [("read_file", {"path": f"notes/{n}.md"}) for n in range(5)]
    fake_llm.queue(calls(*reads), text("Your working rules: be useful first."))
    async with run_gateway() as (gateway, channel):
        await channel.push("read my rules and notes")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
        _, history = await gateway.store.history.load("memory:chat-1", limit=50)
    assert len(fake_llm.requests) == 2  # no re-prompt: the answer is what we have
    assert reply.kind is OutboundKind.REPLY
    answer, note = reply.text.split("\n\n", 1)
    assert answer == "Your working rules: be useful first."
    assert note == "Note: read_file failed 5 times (notes/4.md does not exist)."
    assert history[-1].body["content"] == reply.text  # the model sees it next turn too


async def test_an_empty_answer_after_a_failure_is_reprompted_once(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("read_file", {"path": "missing.txt"})),
        text("OK"),
        text("missing.txt does not exist, so there is nothing to read."),
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("read missing.txt")
        [reply] = await channel.wait_for(1)
    assert "[review ERROR_UNRESOLVED]" in fake_llm.requests[2].last_user_text
    assert reply.text == "missing.txt does not exist, so there is nothing to read."


async def test_the_llm_reviewer_rejecting_every_try_still_delivers_the_first_answer(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def respond(request: Any) -> Any:
        if "You review an assistant's reply" in request.last_user_text:
            return text("FAIL: does not list all twelve months")
        tries = sum("[review GENERIC]" in t for t in request.user_texts)
        return text(
            ["The months are January to December.", "January, February...", "Months."][tries]
        )

    fake_llm.responder = respond
    async with run_gateway(agent={"llm_review": True}) as (gateway, channel):
        await channel.push("name the months")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
        [usage] = await gateway.store.usage.since(3600)
    reviews = [r for r in fake_llm.requests if "You review" in r.last_user_text]
    assert len(reviews) == 3 and "name the months" in reviews[0].last_user_text
    assert "[review GENERIC] " in fake_llm.requests[2].last_user_text
    assert "does not list all twelve months" not in reply.text
    assert (reply.kind, reply.text) == (OutboundKind.REPLY, "The months are January to December.")
    assert usage.input_tokens >= sum(len(str(r.body)) // 4 for r in fake_llm.requests) * 0.9


async def test_a_member_lists_what_they_may_see(
    run_gateway: Any, fake_llm: FakeLLM, tmp_path: Any
) -> None:
    channel = MemoryChannel("telegram")
    fake_llm.queue(
        calls(("list_dir", {"path": "."})), text("You can see skills/ and attachments/.")
    )
    fake_llm.queue(calls(("list_dir", {"path": "attachments/telegram"})), text("Your file."))
    async with run_gateway(channel=channel, **TELEGRAM) as (gateway, _):
        workspace = gateway.settings.workspace_dir
        (workspace / "skills" / "haiku").mkdir(parents=True)
        sent = workspace / "attachments" / "telegram" / "2026-11-23" / "photo.jpg"
        sent.parent.mkdir(parents=True)
        sent.write_bytes(b"jpeg")
        other = workspace / "attachments" / "telegram" / "2026-11-22" / "someone-else.pdf"
        other.parent.mkdir(parents=True)
        other.write_bytes(b"pdf")
        attachment = Attachment(kind="image", path=str(sent), filename="photo.jpg")
        await channel.push(
            "what can you see?", sender_id="3", chat_id="3", attachments=(attachment,)
        )
        await channel.wait_for(1)
        await channel.push("and in attachments?", sender_id="3", chat_id="3")
        await channel.wait_for(2)
    listing = fake_llm.requests[1].tool_results[0]
    assert sorted(listing.splitlines()) == ["attachments/", "skills/"]
    assert fake_llm.requests[3].tool_results[-1] == "2026-11-23/"  # not the other person's day
    assert len(fake_llm.requests) == 4  # no refusals, no re-prompts
