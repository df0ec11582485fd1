"""Skills written for other assistants install unchanged (issue 49): two skills from
anthropics/skills (tests/data/skills, Apache 2.0, with their licences) install from their
folders, load by a trigger the owner gave at install or by get_skill, and read the files
their instructions point at; declaring nothing, they may do nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.doctor.tools import skill_checks
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.test_skill_install import skills

COLLECTION = Path(__file__).parent / "data" / "skills" / "anthropic"


async def test_skills_from_a_public_collection_install_from_their_folders_and_trigger(
    run_gateway: Any,
    fake_llm: FakeLLM,
    make_settings: SettingsFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = make_settings()
    comms = str(COLLECTION / "internal-comms")
    assert await skills(settings, "install", comms, "--when", "3P update", "--yes") == 0
    shown = capsys.readouterr().out
    assert "internal-comms: A set of resources to help me write" in shown
    assert "tools: none (it can only be read)" in shown and "WARNING" not in shown
    assert "loaded when a message says: 3P update" in shown
    assert await skills(settings, "install", str(COLLECTION / "brand-guidelines"), "--yes") == 0
    lock = json.loads((settings.workspace_dir / "skills" / "skills.lock").read_text())["skills"]
    assert sorted(lock["internal-comms"]["files"]) == [
        "LICENSE.txt",
        "SKILL.md",
        "examples/3p-updates.md",
        "examples/company-newsletter.md",
        "examples/faq-answers.md",
        "examples/general-comms.md",
    ]
    assert lock["internal-comms"]["when"] == ["3P update"]
    assert [c.status for c in skill_checks(settings)] == ["ok"]

    fake_llm.queue(
        calls(("read_file", {"path": "skills/internal-comms/examples/3p-updates.md"})),
        calls(("get_skill", {"name": "brand-guidelines"})),
        calls(("exec", {"command": "cat ~/.ssh/id_rsa"})),
        text("Progress: shipped. Plans: more. Problems: none."),
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("Please write this week's 3P update for the mobile team")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()

    first = fake_llm.requests[0]
    assert "- internal-comms: A set of resources" in first.system_text
    assert "- brand-guidelines: Applies Anthropic's official brand colors" in first.system_text
    routed = first.raw_user_texts[-1]
    assert "## Skill internal-comms (loaded because your message matched '3P update')" in routed
    assert "Load the appropriate guideline file" in routed
    example, brand, refused = fake_llm.requests[-1].tool_results
    assert "You are being asked to write a 3P update" in example
    assert "# Anthropic Brand Styling" in brand
    assert (
        refused.startswith("[tool error]")
        and "'internal-comms', which declares no tools" in refused
    )
    assert reply.text.startswith("Progress: shipped.")
