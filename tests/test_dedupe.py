"""A repeated call is skipped only while nothing that could change its result happened:
after a write, a send or a new job the repeat runs again and the model sees the new state."""

from __future__ import annotations

from typing import Any

from tests.fakes.llm import FakeLLM, calls, text

NOT_RUN = "Not run again"


async def test_a_read_after_a_write_sees_the_new_content(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("write_file", {"path": "a.txt", "content": "one"})),
        calls(("read_file", {"path": "a.txt"})),
        calls(("write_file", {"path": "a.txt", "content": "two"})),
        calls(("read_file", {"path": "a.txt"})),
        calls(("list_dir", {})),
        calls(("write_file", {"path": "b.txt", "content": "bee"})),
        calls(("list_dir", {})),
        text("a.txt now says two; b.txt is there too."),
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("write one, then two, and check")
        await channel.wait_for(1)
    results = fake_llm.requests[-1].tool_results
    assert results[1] == "one" and results[3] == "two"
    assert "b.txt" not in results[4] and "b.txt (3 bytes)" in results[6]
    assert not any(NOT_RUN in r for r in results)


async def test_an_identical_repeat_with_nothing_in_between_is_still_skipped(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("read_file", {"path": "AGENTS.md"})),
        calls(("memory_read", {})),  # reads change nothing
        calls(("read_file", {"path": "AGENTS.md"})),
        text("Read it."),
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("read AGENTS.md twice")
        await channel.wait_for(1)
    results = fake_llm.requests[-1].tool_results
    assert NOT_RUN in results[2] and "step 1" in results[2]


async def test_memory_search_after_an_append_finds_the_new_line(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("memory_search", {"query": "marmalade"})),
        calls(("memory_append", {"content": "Likes marmalade", "to": "memory"})),
        calls(("memory_search", {"query": "marmalade"})),
        text("Noted: you like marmalade."),
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("remember that I like marmalade")
        await channel.wait_for(1)
    results = fake_llm.requests[-1].tool_results
    assert "nothing found" in results[0]
    assert "Likes marmalade" in results[2]


async def test_cron_list_runs_again_after_a_new_job_and_every_time(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("cron", {"action": "list"})),
        calls(("cron", {"action": "add", "schedule": "in 20 minutes", "message": "Tea!"})),
        calls(("cron", {"action": "list"})),
        calls(("cron", {"action": "list"})),  # time-sensitive: jobs fire on their own
        text("You have one reminder: Tea!"),
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("remind me about tea in 20 minutes")
        await channel.wait_for(1)
    results = fake_llm.requests[-1].tool_results
    assert results[0] == "no scheduled jobs"
    assert "Tea!" in results[2] and "Tea!" in results[3]


async def test_repeatable_tools_run_every_time(run_gateway: Any, fake_llm: FakeLLM) -> None:
    same = {"content": "Walked the dog", "to": "today"}
    fake_llm.queue(
        calls(("memory_append", same)),
        calls(("memory_append", same)),
        text("Noted twice, as you asked."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("note 'walked the dog' twice")
        await channel.wait_for(1)
        notes = list((gateway.settings.workspace_dir / "memory").glob("*.md"))
    assert [NOT_RUN in r for r in fake_llm.requests[-1].tool_results] == [False, False]
    [note] = notes
    assert note.read_text().count("Walked the dog") == 2
