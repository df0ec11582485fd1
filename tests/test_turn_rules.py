"""Rules of a turn that had no test of their own: what reaches the prompt, argument schemas,
the review's "acted" rule, the turn's token cap, memory_patch, the plan task type, the tool
concurrency cap and the daily session reset."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent.guards.trace import read_trace
from agent.tools.base import Tool, ToolContext, ToolResult, schema
from channels.memory import MemoryChannel
from gateway.core.messages import OutboundKind
from gateway.core.schedule_spec import zone
from gateway.runtime.app import Gateway
from tests.conftest import SettingsFactory
from tests.fakes.clock import FakeClock
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text


def guard_codes(gateway: Gateway, guard: str) -> list[str]:
    traces = sorted((gateway.settings.data_dir / "traces").glob("*/*.jsonl"))
    return [
        e["code"]
        for path in traces
        for e in read_trace(path)
        if e["event"] == "guard" and e["guard"] == guard
    ]


async def test_bootstrap_files_memory_and_recent_notes_reach_the_owners_prompt(
    run_gateway: Any, fake_llm: FakeLLM, make_settings: SettingsFactory
) -> None:
    settings = make_settings()
    workspace = settings.workspace_dir
    today = datetime.now(zone(settings.timezone)).date()
    (workspace / "USER.md").write_text("# User\nThe owner is called Robin and likes tea.")
    (workspace / "MEMORY.md").write_text("# Memory\nRobin's sister is Alex.")
    (workspace / "memory").mkdir(exist_ok=True)
    notes = {
        today - timedelta(days=2): "Planted basil.",
        today - timedelta(days=1): "Booked the dentist for Friday.",
        today: "Bought oat milk.",
    }
    for day, note in notes.items():
        (workspace / "memory" / f"{day.isoformat()}.md").write_text(f"# {day}\n- {note}")
    async with run_gateway(settings) as (_gateway, channel):
        await channel.push("what do you know about me?")
        await channel.wait_for(1)
    system = fake_llm.requests[0].system_text
    assert "## USER.md" in system and "Robin and likes tea" in system
    assert "## SOUL.md" in system  # the persona files of the template
    assert "Robin's sister is Alex." in system
    assert "Booked the dentist" in system and "Bought oat milk" in system
    assert "Planted basil" not in system  # only yesterday and today


async def test_missing_and_extra_arguments_are_refused_with_the_valid_ones(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("write_file", {"path": "a.txt"}), ("read_file", {"path": "AGENTS.md", "mode": "r"})),
        text("Both calls were wrong; nothing was written."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("write a.txt")
        await channel.wait_for(1)
        written = (gateway.settings.workspace_dir / "a.txt").exists()
    missing, extra = fake_llm.requests[1].tool_results
    assert "'content' is a required property" in missing
    assert "valid arguments for write_file: path: string, content: string" in missing
    assert "('mode' was unexpected)" in extra and "offset?: integer" in extra
    assert not written


async def test_a_done_side_effect_makes_a_short_confirmation_enough(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(calls(("write_file", {"path": "list.txt", "content": "milk"})), text("Done."))
    async with run_gateway() as (gateway, channel):
        await channel.push("save 'milk' to list.txt")
        [reply] = await channel.wait_for(1)
        codes = guard_codes(gateway, "review")
    assert reply.text == "Done." and len(fake_llm.requests) == 2  # acted: no re-prompt
    assert codes == []


async def test_the_turn_token_cap_ends_the_turn_with_a_notice(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: calls(
        ("list_dir", {"path": f"d{len(request.tool_results)}"})
    )
    async with run_gateway(agent={"max_turn_tokens": 1_000}) as (gateway, channel):
        await channel.push("list every folder")
        [reply] = await channel.wait_for(1)
        codes = guard_codes(gateway, "limits")
    assert len(fake_llm.requests) == 1  # the first call alone used more than 1,000 tokens
    assert reply.kind is OutboundKind.NOTICE and "token budget" in reply.text
    assert codes == ["TOKEN_LIMIT"]


async def test_memory_patch_replaces_one_passage_and_refuses_an_ambiguous_one(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("memory_patch", {"old_text": "lives in Berlin", "new_text": "lives in Lisbon"})),
        calls(("memory_patch", {"old_text": "likes", "new_text": "loves"})),
        text("Updated: you live in Lisbon now."),
    )
    async with run_gateway() as (gateway, channel):
        memory = gateway.settings.workspace_dir / "MEMORY.md"
        memory.write_text("- Robin lives in Berlin\n- Robin likes tea\n- Robin likes rain\n")
        await channel.push("update my memory: I moved to Lisbon")
        await channel.wait_for(1)
        patched = memory.read_text()
    first, second = fake_llm.requests[-1].tool_results
    assert first == "memory updated"
    assert "occurs 2 times" in second
    assert patched == "- Robin lives in Lisbon\n- Robin likes tea\n- Robin likes rain\n"


async def test_a_plan_task_reads_and_plans_but_cannot_act(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def respond(request: Recorded) -> Step:
        if "Plan the move" not in " ".join(request.user_texts):
            return text("Started planning in the background.")
        if not request.tool_results:
            return calls(("write_file", {"path": "moved.txt", "content": "x"}))
        return text("1. Book a van. 2. Pack the kitchen.")

    fake_llm.queue(calls(("spawn", {"task": "Plan the move.", "task_type": "plan"})))
    fake_llm.responder = respond
    async with run_gateway() as (gateway, channel):
        await channel.push("plan my move in the background")
        replies = await channel.wait_for(2)
        await gateway.wait_idle()
        moved = (gateway.settings.workspace_dir / "moved.txt").exists()
    plan = next(r for r in fake_llm.requests if "Plan the move" in r.user_texts[0])
    assert "Task type: plan." in plan.system_text and "numbered plan" in plan.system_text
    assert "read_file" in plan.tool_names
    assert not {"write_file", "edit_file", "exec", "memory_write"} & set(plan.tool_names)
    assert not moved
    assert replies[-1].text.endswith("1. Book a van. 2. Pack the kitchen.")


class Slow(Tool):
    """Holds its call until a second one is running too, or a second has passed."""

    name = "slow"
    description = "slow"
    parameters: ClassVar[dict[str, Any]] = schema({})

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.both = asyncio.Event()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running >= 2:
            self.both.set()
        try:
            async with asyncio.timeout(1):
                await self.both.wait()
        except TimeoutError:
            pass
        finally:
            self.running -= 1
        return ToolResult("ok")


async def test_the_tool_concurrency_cap_holds_across_chats(
    make_settings: SettingsFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    for cap, expected in ((1, 1), (2, 2)):
        slow = Slow()
        fake_llm.responder = lambda request: (
            text("The slow tool finished.") if request.tool_results else calls(("slow", {}))
        )
        channel = MemoryChannel()
        settings = make_settings(
            home=tmp_path / f"home-{cap}", limits={"max_concurrent_tools": cap}
        )
        async with Gateway(settings, channels=[channel], extra_tools=[slow]) as gateway:
            await channel.push("go", chat_id="a")
            await channel.push("go", chat_id="b")
            await channel.wait_for(2, max_wait=30)
            await gateway.wait_idle()
        assert slow.most == expected, f"cap {cap}"


async def test_a_daily_session_starts_afresh_on_a_new_day(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    async with run_gateway(agent={"session_reset": "daily"}) as (gateway, channel):
        await channel.push("my locker code is 4711")
        await channel.wait_for(1)
        await channel.push("and today?")
        await channel.wait_for(2)
        yesterday = time.time() - 86_400
        await gateway.store.db.run(
            lambda conn: conn.execute("UPDATE sessions SET last_active = ?", (yesterday,))
        )
        await channel.push("what is my locker code?")
        await channel.wait_for(3)
        codes = guard_codes(gateway, "session")
    same_day, next_day = fake_llm.requests[1], fake_llm.requests[2]
    assert "my locker code is 4711" in same_day.user_texts  # same day: history kept
    assert next_day.user_texts == ["what is my locker code?"]  # a new day: a fresh session
    assert codes == ["RESET"]


@pytest.mark.parametrize(
    ("person_zone", "reset"), [("Pacific/Kiritimati", True), ("America/New_York", False)]
)
async def test_a_daily_session_ends_with_the_persons_own_day(
    run_gateway: Any, fake_llm: FakeLLM, person_zone: str, reset: bool
) -> None:
    """The gateway's clock says 10:30 on the 7th (UTC) and the chat was last active at 09:00:
    the same day there. In Kiritimati (UTC+14) that was 23:00 and it is now past midnight, a
    new day; in New York both are early on the 7th."""
    clock = FakeClock(datetime(2026, 12, 7, 10, 30, tzinfo=UTC))
    async with run_gateway(
        clock=clock,
        agent={"session_reset": "daily"},
        people={"memory:user-1": {"timezone": person_zone}},
    ) as (gateway, channel):
        await channel.push("my locker code is 4711")
        await channel.wait_for(1)
        before = datetime(2026, 12, 7, 9, 0, tzinfo=UTC).timestamp()
        await gateway.store.db.run(
            lambda conn: conn.execute("UPDATE sessions SET last_active = ?", (before,))
        )
        await channel.push("what is my locker code?")
        await channel.wait_for(2)
    asked = fake_llm.requests[1].user_texts
    if reset:
        assert asked == ["what is my locker code?"]  # their new day: a fresh session
    else:
        assert "my locker code is 4711" in asked  # still their day: history kept
