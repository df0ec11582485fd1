"""SKILL.md front matter is YAML: folded and quoted values work, broken front matter is
skipped (the rest of the skills still load) and `switchboard doctor` names the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.skills import SkillLibrary
from gateway.cli.doctor.command import run_doctor
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text

FOLDED = """\
---
name: pdf-tools
description: >
  Extract text from PDFs,
  merge and split them.
tags: [pdf, documents]
---
Use `pdftotext` first.
"""

BROKEN = """\
---
name: broken
description: [never closed
---
Body.
"""


def write_skill(root: Path, folder: str, content: str) -> Path:
    path = root / "skills" / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def test_folded_description_is_one_line_and_broken_skills_are_skipped(tmp_path: Path) -> None:
    write_skill(tmp_path, "pdf", FOLDED)
    write_skill(tmp_path, "broken", BROKEN)
    write_skill(tmp_path, "quoted", '---\nname: "quotes: fine"\ndescription: \'Say "hi"\'\n---\n')
    write_skill(tmp_path, "list", "---\n- just\n- a list\n---\n")
    write_skill(tmp_path, "plain", "No front matter; named after its folder.")
    library = SkillLibrary(tmp_path / "skills")
    skills = {s.name: s.description for s in library.skills()}
    assert skills == {
        "pdf-tools": "Extract text from PDFs, merge and split them.",
        "quotes: fine": 'Say "hi"',
        "plain": "",
    }
    problems = {p.path.parent.name: p.reason for p in library.problems()}
    assert set(problems) == {"broken", "list"}
    assert "not valid YAML" in problems["broken"] and "line 3" in problems["broken"]
    assert "not a set of key: value fields" in problems["list"]
    assert ">" not in library.index() and "tags" not in library.index()


async def test_get_skill_returns_the_body_after_yaml_front_matter(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory
) -> None:
    settings = make_settings()
    write_skill(settings.workspace_dir, "pdf", FOLDED)
    write_skill(settings.workspace_dir, "broken", BROKEN)
    fake_llm.queue(calls(("get_skill", {"name": "pdf-tools"})), text("Use pdftotext."))
    async with run_gateway(settings) as (_gateway, channel):
        await channel.push("how do I read a pdf?")
        await channel.wait_for(1)
    assert (
        "- pdf-tools: Extract text from PDFs, merge and split them."
        in fake_llm.requests[0].system_text
    )
    assert "broken" not in fake_llm.requests[0].system_text
    assert fake_llm.requests[1].tool_results[0] == "Use `pdftotext` first.\n"


async def test_doctor_names_a_skill_with_broken_front_matter(
    make_settings: SettingsFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings()
    write_skill(settings.workspace_dir, "broken", BROKEN)
    write_skill(settings.workspace_dir, "pdf", FOLDED)
    assert await run_doctor(settings) == 0  # a warning: the gateway runs without that skill
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "skills" in line and "broken" in line)
    assert line.startswith("[WARN]")
    assert "skills/broken/SKILL.md" in line and "not valid YAML" in line and "skipped" in line
    assert "1 skill loaded" in out


DEPLOY = """\
---
name: deploy
description: How this site is deployed.
when:
  - deploy the site
  - /\\brelease v\\d+\\.\\d+/
---
Run `make deploy` from the repository root, then check /healthz.
"""


async def test_a_skill_is_loaded_by_its_trigger_and_the_trace_says_why(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory
) -> None:
    from agent.guards.trace import read_trace

    settings = make_settings()
    write_skill(settings.workspace_dir, "deploy", DEPLOY)
    fake_llm.responder = lambda request: text("Here is how it goes, step by step.")
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("Could you DEPLOY the   site tonight?")
        await channel.push("please cut release v2.3 of the app", chat_id="chat-2")
        await channel.push("what's the weather like?", chat_id="chat-3")
        await channel.wait_for(3)
        await gateway.wait_idle()
    # kept with the message that called for it (the cache holds: tests/test_prompt_cache.py)
    by_question = {r.last_user_text: r.raw_user_texts[-1] for r in fake_llm.requests}
    loaded = "## Skill deploy (loaded because your message matched"
    assert loaded in by_question["Could you DEPLOY the   site tonight?"]
    assert (
        "Run `make deploy` from the repository root"
        in by_question["Could you DEPLOY the   site tonight?"]
    )
    assert (
        "'/\\\\brelease v\\\\d+\\\\.\\\\d+/'" in by_question["please cut release v2.3 of the app"]
    )
    assert loaded not in by_question["what's the weather like?"]
    events = [
        e
        for path in sorted((settings.data_dir / "traces").glob("*/*.jsonl"))
        for e in read_trace(path)
        if e["event"] == "skill"
    ]
    assert sorted((e["trigger"], e["matched"]) for e in events) == [
        ("/\\brelease v\\d+\\.\\d+/", "release v2.3"),
        ("deploy the site", "DEPLOY the   site"),
    ]


async def test_a_skill_reached_through_a_link_is_never_loaded_by_a_trigger(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory
) -> None:
    """A link out of skills/ (say, into attachments a turn could write) is not the owner's
    skill: it stays listed for get_skill, but no message loads it on its own."""
    settings = make_settings()
    outside = settings.workspace_dir / "attachments" / "deploy"
    outside.mkdir(parents=True)
    (outside / "SKILL.md").write_text(DEPLOY)
    (settings.workspace_dir / "skills").mkdir(exist_ok=True)
    (settings.workspace_dir / "skills" / "deploy").symlink_to(outside)
    fake_llm.responder = lambda request: text("Here is how it goes, step by step.")
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("deploy the site")
        await channel.wait_for(1)
        await gateway.wait_idle()
    [request] = fake_llm.requests
    assert "## Skill deploy" not in request.system_text + request.raw_user_texts[-1]


def test_a_broken_trigger_pattern_leaves_the_skill_out_with_the_reason(tmp_path: Path) -> None:
    write_skill(tmp_path, "bad", "---\nname: bad\nwhen: /([unclosed/\n---\nBody.\n")
    library = SkillLibrary(tmp_path / "skills")
    assert library.skills() == ()
    [problem] = library.problems()
    assert "when: /([unclosed/ is not a valid pattern" in problem.reason
