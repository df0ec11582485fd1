"""Decision guards driven end to end by a scripted model through the real loop.

Each case asserts what the user receives and what the stored history holds afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.guards.trace import find_trace, read_trace
from gateway.core.messages import OutboundKind
from gateway.runtime.app import Gateway
from tests.fakes.llm import FakeLLM, Step, as_written, calls, text


async def stored_history(
    gateway: Gateway, session_key: str = "memory:chat-1"
) -> list[dict[str, Any]]:
    _, messages = await gateway.store.history.load(session_key, limit=100)
    return [m.body for m in messages]


def assert_valid_history(history: list[dict[str, Any]]) -> None:
    """Every tool call has a result and every argument string is a JSON object."""
    pending: set[str] = set()
    for body in history:
        for call in body.get("tool_calls", []):
            assert isinstance(json.loads(call["arguments"]), dict)
            pending.add(call["id"])
        if body["role"] == "tool":
            pending.discard(body["tool_call_id"])
    assert pending == set()


def decisions(settings_data: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for path in sorted(settings_data.glob("traces/*/*.jsonl")):
        events.extend(e for e in read_trace(path) if e["event"] == "guard")
    return events


async def test_broken_json_arguments_are_not_run_and_history_stays_valid(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        Step(calls=(("write_file", '{"path": "a.txt", "content": "x"'),)),
        text("Sorry, my first attempt failed; the file is not written."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("write a.txt")
        [reply] = await channel.wait_for(1)
        history = await stored_history(gateway)
        workspace = gateway.settings.workspace_dir
    assert not (workspace / "a.txt").exists()
    assert "not valid JSON" in fake_llm.requests[1].tool_results[0]
    assert reply.text.startswith("Sorry")
    assert_valid_history(history)
    assert (
        fake_llm.requests[1].body["messages"][-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    )


async def test_double_encoded_and_repeated_arguments_are_repaired(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    double = json.dumps(json.dumps({"path": "b.txt", "content": "twice"}))
    fake_llm.queue(
        Step(calls=(("write_file", double),)),
        Step(calls=(("read_file", '{"path": "b.txt"}{"path": "b.txt"}'),)),
        text("b.txt says: twice"),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("write b.txt")
        [reply] = await channel.wait_for(1)
        data = gateway.settings.data_dir
    assert reply.text == "b.txt says: twice"
    assert fake_llm.requests[2].tool_results[-1] == "twice"
    assert {d["code"] for d in decisions(data)} >= {"NATIVE"}


async def test_unknown_tool_gets_the_valid_names(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        calls(("delete_everything", {})), text("I can't do that; there is no such tool.")
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("delete everything")
        [reply] = await channel.wait_for(1)
    result = fake_llm.requests[1].tool_results[0]
    assert "unknown tool 'delete_everything'" in result and "read_file" in result
    assert reply.text.startswith("I can't")


async def test_tool_name_streamed_twice_is_repaired(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(calls(("list_dirlist_dir", {})), text("Listed it."))
    async with run_gateway() as (_gateway, channel):
        await channel.push("what is in the workspace?")
        await channel.wait_for(1)
    assert "AGENTS.md" in fake_llm.requests[1].tool_results[0]


async def test_json_action_in_plain_text_is_executed(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        text('Let me look.\n```json\n{"tool": "read_file", "arguments": {"path": "SOUL.md"}}\n```'),
        text("Your SOUL.md describes a calm, direct personality."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("what does SOUL.md say?")
        [reply] = await channel.wait_for(1)
        history = await stored_history(gateway)
    assert "Calm, direct" in fake_llm.requests[1].tool_results[0]
    assert reply.text.startswith("Your SOUL.md")
    assert_valid_history(history)


async def test_a_command_shown_in_an_answer_is_not_run(run_gateway: Any, fake_llm: FakeLLM) -> None:
    """A model explaining how something is done writes the call as an example: before, the
    example ran (and vanished from the answer)."""
    example = (
        'To create it you would run {"name": "exec", "arguments": {"command": '
        '"echo hi > created_by_prose.txt"}} in the shell.'
    )
    fake_llm.queue(text(example))
    async with run_gateway() as (gateway, channel):
        await channel.push("how would I create a file from the shell?")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
        workspace = gateway.settings.workspace_dir
    assert reply.text == example
    assert not (workspace / "created_by_prose.txt").exists()
    assert len(fake_llm.requests) == 1  # no tool ran, so no second call


async def test_key_value_action_block_is_executed(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        text(
            "action: write_file\nthoughts: save it\npath: kv.txt\ncontent: |\n  line one\n  line two"
        ),
        text("Saved kv.txt."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("save two lines")
        await channel.wait_for(1)
        workspace = gateway.settings.workspace_dir
    assert (workspace / "kv.txt").read_text() == "line one\nline two"


async def test_identical_call_twice_runs_once(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        calls(("exec", {"command": "echo tick >> ticks.txt; cat ticks.txt"})),
        calls(("exec", {"command": "echo tick >> ticks.txt; cat ticks.txt"})),
        text("Ticked once: tick"),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("tick")
        [reply] = await channel.wait_for(1)
        workspace = gateway.settings.workspace_dir
    assert (workspace / "ticks.txt").read_text() == "tick\n"
    assert "already made at step 1" in fake_llm.requests[2].tool_results[-1]
    assert reply.text == "Ticked once: tick"


async def test_ping_pong_gets_a_hint_then_a_hard_stop(run_gateway: Any, fake_llm: FakeLLM) -> None:
    a = calls(("read_file", {"path": "AGENTS.md"}))
    b = calls(("list_dir", {}))
    fake_llm.responder = lambda request: a if len(fake_llm.requests) % 2 else b
    async with run_gateway() as (gateway, channel):
        await channel.push("loop forever")
        [notice] = await channel.wait_for(1)
        history = await stored_history(gateway)
        data = gateway.settings.data_dir
    assert notice.kind is OutboundKind.NOTICE
    assert "going in circles" in notice.text
    assert any("[guard] Loop detected" in r for r in fake_llm.requests[-1].tool_results)
    codes = [d["code"] for d in decisions(data) if d["guard"] == "loops"]
    assert codes == ["PING_PONG", "PING_PONG"]  # the hint, then the stop, both for A↔B
    assert "(ping pong)" in notice.text
    assert len(fake_llm.requests) < 12
    assert_valid_history(history)


async def test_same_tool_without_progress_is_stopped(run_gateway: Any, fake_llm: FakeLLM) -> None:
    # a read that finds nothing, asked of another day each time (a command would ask for
    # approval after the first one's output, which is outside content)
    counter = iter(range(1, 29))
    fake_llm.responder = lambda request: calls(
        ("memory_read", {"which": f"2020-01-{next(counter):02d}"})
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("keep trying")
        [notice] = await channel.wait_for(1)
    assert "going in circles" in notice.text
    assert len(fake_llm.requests) <= 7


async def test_empty_final_answer_is_reprompted(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(text(""), text("Here is the real answer."))
    async with run_gateway() as (gateway, channel):
        await channel.push("answer me")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
        history = await stored_history(gateway)
    assert reply.text == "Here is the real answer."
    assert "[review NO_SEND]" in fake_llm.requests[1].last_user_text
    shown = [as_written(h["content"]) for h in history]
    assert shown == ["answer me", "Here is the real answer."]


async def test_ack_only_reply_gets_k_retries_then_a_failure_notice(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: text("On it!")
    async with run_gateway() as (gateway, channel):
        await channel.push("book me a flight")
        [notice] = await channel.wait_for(1)
        await gateway.wait_idle()
    assert len(channel.sent) == 1
    assert notice.kind is OutboundKind.NOTICE and notice.text.startswith("Sorry")
    assert len(fake_llm.requests) == 3  # the answer plus review_retries (2) re-prompts
    assert "[review NO_SUBSTANTIVE]" in fake_llm.requests[1].last_user_text


async def test_status_update_as_the_only_reply_is_caught(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text("I'll look into that for you."), text("The answer is 7."))
    async with run_gateway() as (_gateway, channel):
        await channel.push("what is 3+4?")
        [reply] = await channel.wait_for(1)
    assert reply.text == "The answer is 7."
    assert "[review ACK_ONLY]" in fake_llm.requests[1].last_user_text


async def test_results_never_shared_are_caught(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        calls(("read_file", {"path": "IDENTITY.md"})),
        text("Done."),
        text("IDENTITY.md says your name is Switchboard."),
    )
    async with run_gateway() as (_gateway, channel):
        await channel.push("read IDENTITY.md to me")
        [reply] = await channel.wait_for(1)
    assert reply.text.startswith("IDENTITY.md says")
    assert "[review UNSENT_RESULTS]" in fake_llm.requests[2].last_user_text


async def test_unexplained_tool_error_is_added_by_the_gateway(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(calls(("read_file", {"path": "missing.txt"})), text("All good!"))
    async with run_gateway() as (gateway, channel):
        await channel.push("read missing.txt")
        [reply] = await channel.wait_for(1)
        data = gateway.settings.data_dir
    assert reply.text == "All good!\n\nNote: read_file failed (missing.txt does not exist)."
    assert len(fake_llm.requests) == 2  # no re-prompt: asking again rarely fixes a failure
    assert [d["code"] for d in decisions(data)] == ["ERROR_UNRESOLVED", "NOTE"]


async def test_failed_attempt_leaves_history_after_a_successful_retry(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        calls(("read_file", {"path": "notes.md"})),
        calls(("read_file", {"path": "AGENTS.md"})),
        text("Found it in AGENTS.md: be useful first."),
    )
    async with run_gateway() as (gateway, channel):
        await channel.push("find the working rules")
        await channel.wait_for(1)
        history = await stored_history(gateway)
    contents = json.dumps(history)
    assert "notes.md" not in contents  # the failed attempt and its error are gone
    assert "AGENTS.md" in contents
    assert_valid_history(history)
    # Within the turn the model still saw its failure:
    assert "does not exist" in fake_llm.requests[1].tool_results[0]


async def test_safe_mode_refuses_exec(run_gateway: Any, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        calls(("exec", {"command": "touch pwned"})),
        text("Sorry, running commands is not available here."),
    )
    async with run_gateway(tools={"safe_mode": True}) as (gateway, channel):
        await channel.push("run touch pwned")
        [reply] = await channel.wait_for(1)
        workspace = gateway.settings.workspace_dir
    assert not (workspace / "pwned").exists()
    assert (
        "exec" not in fake_llm.requests[0].tool_names
        and "write_file" not in fake_llm.requests[0].tool_names
    )
    assert "not available in safe mode" in fake_llm.requests[1].tool_results[0]
    assert reply.text.startswith("Sorry")


async def test_step_limit_ends_with_an_answer(run_gateway: Any, fake_llm: FakeLLM) -> None:
    counter = iter(range(1000))
    fake_llm.responder = lambda request: (
        text("I read several files; here is what I have.")
        if not request.body.get("tools")
        else calls(("read_file", {"path": f"f{next(counter)}.txt"}))
    )
    async with run_gateway(agent={"max_iterations": 3}) as (_gateway, channel):
        await channel.push("read all the files")
        [reply] = await channel.wait_for(1)
    assert reply.text == "I read several files; here is what I have."
    assert "step limit" in fake_llm.requests[-1].last_user_text


async def test_trace_records_guard_decisions_and_the_cli_prints_them(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text(""), text("ok then, the answer"))
    async with run_gateway() as (gateway, channel):
        await channel.push("hi")
        await channel.wait_for(1)
        await gateway.wait_idle()
        data = gateway.settings.data_dir
        settings = gateway.settings
    [event] = [d for d in decisions(data) if d["guard"] == "review"]
    assert (event["code"], event["attempt"]) == ("NO_SEND", 1)
    path = next((data / "traces").glob("*/*.jsonl"))
    assert find_trace(data / "traces", path.stem[:8]) == path
    from gateway.cli.admin import show_trace

    assert show_trace(settings, path.stem[:8]) == 0
