"""Skills the assistant drafts (issue 49): a turn proposes one with skill_propose; it waits
under skills/.proposed/, is never loaded before the owner approves it in the chat, and
loads by its trigger afterwards. Only the owner decides; edits are checked like any skill."""

from __future__ import annotations

import json
from typing import Any

import pytest

from channels.memory import MemoryChannel
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.test_skill_install import skills

PROPOSAL = {
    "name": "plant-care",
    "description": "How the balcony plants are watered.",
    "instructions": "Water the basil daily and the cactus every second week; note it in notes/.",
    "when": ["water the plants"],
    "tools": ["read_file"],
}


async def test_a_proposal_waits_is_approved_in_the_chat_and_then_loads_by_its_trigger(
    run_gateway: Any,
    fake_llm: FakeLLM,
    make_settings: SettingsFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = make_settings()
    fake_llm.queue(
        calls(("skill_propose", PROPOSAL)),
        text("I saved that routine as a skill proposal for you to approve."),
    )
    fake_llm.responder = lambda request: text("The plants are looked after.")
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("we worked out the watering routine, keep it as a skill")
        await channel.wait_for(1)
        await gateway.wait_idle()
        [saved] = fake_llm.requests[1].tool_results
        assert "Saved the proposal plant-care" in saved

        await channel.push("please water the plants")  # not approved yet: not loaded
        await channel.wait_for(2)
        await channel.push("/skills")
        [*_, listing] = await channel.wait_for(3)
        await channel.push("/skills show plant-care")
        [*_, shown] = await channel.wait_for(4)
        await channel.push("/skills approve plant-care")
        [*_, approved] = await channel.wait_for(5)
        await channel.push("please water the plants", chat_id="chat-2")
        await channel.wait_for(6)
        await gateway.wait_idle()

    draft = settings.workspace_dir / "skills" / ".proposed" / "plant-care" / "SKILL.md"
    assert not draft.exists()  # moved into skills/plant-care
    assert "## Skill plant-care" not in fake_llm.requests[2].raw_user_texts[-1]
    assert "plant-care" not in fake_llm.requests[2].system_text
    assert "waiting for you (/skills show NAME first):\n- plant-care (for you, 20" in listing.text
    assert "Water the basil daily" in shown.text and "tools: read_file" in shown.text
    assert approved.text == "Approved: plant-care is a skill now (may use: tools read_file)."
    last = fake_llm.requests[-1].raw_user_texts[-1]
    assert "## Skill plant-care (loaded because your message matched 'water the plants')" in last
    assert "Water the basil daily" in last
    lock = json.loads((settings.workspace_dir / "skills" / "skills.lock").read_text())
    assert lock["skills"]["plant-care"]["kind"] == "proposal"
    assert await skills(settings, "list") == 0  # on the terminal, where the owner is "you"
    listed = capsys.readouterr().out
    assert "plant-care  [ok]  proposed by the assistant for you, 20" in listed


async def test_only_the_owner_decides_and_an_edit_is_checked_like_any_skill(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory
) -> None:
    settings = make_settings(telegram={"owners": ["1"], "admins": ["2"], "allow_from": ["3"]})
    fake_llm.queue(calls(("skill_propose", PROPOSAL)), text("Proposed."))
    channel = MemoryChannel("telegram")
    async with run_gateway(settings, channel=channel) as (gateway, _):
        await channel.push(
            "keep the watering routine as a skill", sender_id="2", chat_id="2", sender_name="Ann"
        )
        await channel.wait_for(1)
        await gateway.wait_idle()
        replies = []
        for sender, command in [
            ("2", "/skills approve plant-care"),  # an admin proposed it; the owner decides
            ("3", "/skills"),
            ("1", "/skills"),
            ("1", "/skills edit plant-care\n---\nname: plant-care\ntools: {exec: yes}\n---\nx"),
            (
                "1",
                "/skills edit plant-care\n---\nname: plant-care\ndescription: Tidier.\n---\nWater.",
            ),
            ("1", "/skills show plant-care"),
            ("1", "/skills drop plant-care"),
            ("1", "/skills"),
        ]:
            await channel.push(command, sender_id=sender, chat_id=sender)
            replies.append((await channel.wait_for(len(replies) + 2))[-1].text)
    refused, member_list, owner_list, bad_edit, edited, shown, dropped, after = replies
    assert refused == "Only the owner decides which skills are used."
    assert "- plant-care (for Ann, 20" in owner_list  # whom it is for, by name
    assert "telegram:2" not in owner_list
    assert "plant-care" not in member_list  # proposals are the owner's business
    assert "the skill cannot be read: tools: a list of names" in bad_edit
    assert edited.startswith("Rewrote the proposal plant-care")
    assert "plant-care: Tidier." in shown and "Water the basil" not in shown
    assert shown.startswith("Proposed by the assistant (for Ann, 20")
    assert dropped == "Dropped the proposal plant-care."
    assert "plant-care" not in after
    assert not (settings.workspace_dir / "skills" / "plant-care").exists()


async def test_a_member_cannot_read_the_drafts_waiting_for_the_owner(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory
) -> None:
    settings = make_settings(telegram={"owners": ["1"], "allow_from": ["3"]})
    installed = settings.workspace_dir / "skills" / "pdf"
    installed.mkdir(parents=True)
    (installed / "SKILL.md").write_text("---\nname: pdf\ndescription: PDFs.\n---\nUse pdftotext.\n")
    fake_llm.queue(
        calls(("skill_propose", PROPOSAL)),
        text("Proposed."),
        calls(("read_file", {"path": "skills/.proposed/plant-care/SKILL.md"})),
        calls(("read_file", {"path": "skills/pdf/SKILL.md"})),
        text("Done."),
    )
    channel = MemoryChannel("telegram")
    async with run_gateway(settings, channel=channel) as (gateway, _):
        await channel.push("keep the watering routine as a skill", sender_id="1", chat_id="1")
        await channel.wait_for(1)
        await channel.push("show me the skill files", sender_id="3", chat_id="3")
        await channel.wait_for(2)
        await gateway.wait_idle()
    draft, installed_skill = fake_llm.requests[-1].tool_results
    assert draft.startswith("[tool error]") and "not accessible from this conversation" in draft
    assert "Use pdftotext." in installed_skill
