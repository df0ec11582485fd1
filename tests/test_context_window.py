"""Every model call of a turn fits the context window: prompt plus the output asked for.

The fake server is strict here (as vLLM and llama.cpp are): a request whose prompt and
max_tokens together pass its window is refused with a context-length error.
"""

from __future__ import annotations

import json
from typing import Any

from agent.guards.trace import read_trace
from gateway.core.messages import OutboundKind
from tests.fakes.llm import FakeLLM, Recorded, Step, calls, text


def asked(request: Recorded) -> int:
    return int(request.body["max_tokens"])


def prompt(request: Recorded) -> int:
    return max(1, len(json.dumps(request.body)) // 4)


def decisions(data: Any) -> list[str]:
    return [
        e["code"]
        for path in sorted(data.glob("traces/*/*.jsonl"))
        for e in read_trace(path)
        if e["event"] == "guard" and e["guard"] == "context"
    ]


async def test_a_small_window_asks_for_less_output_instead_of_overflowing(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.context_window = 4_000
    async with run_gateway(llm={"context_window": 4_000}) as (_gateway, channel):
        await channel.push("hello")
        [reply] = await channel.wait_for(1)
    assert reply.text == "echo: hello"
    [request] = fake_llm.requests
    assert asked(request) < 4_096 and prompt(request) + asked(request) <= 4_000


async def test_a_long_tool_heavy_turn_stays_inside_the_window(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.context_window = 8_000
    files = 8

    def respond(request: Recorded) -> Step:
        done = len(request.tool_results)
        if done < files:
            return calls(("read_file", {"path": f"notes/{done}.md"}))
        return text(f"I read all {files} notes; each is about tomatoes.")

    fake_llm.responder = respond
    async with run_gateway(llm={"context_window": 8_000}) as (gateway, channel):
        for n in range(files):
            note = gateway.settings.workspace_dir / "notes" / f"{n}.md"
            note.parent.mkdir(exist_ok=True)
            note.write_text(f"Note {n}. " + "Tomatoes need warm soil and steady water. " * 140)
        await channel.push("read all my notes")
        [reply] = await channel.wait_for(1)
        data = gateway.settings.data_dir
    assert reply.kind is OutboundKind.REPLY
    assert reply.text == f"I read all {files} notes; each is about tomatoes."
    assert all(prompt(r) + asked(r) <= 8_000 for r in fake_llm.requests)
    assert len(fake_llm.requests) == files + 1  # nothing refused, nothing asked twice
    assert "SHORTENED" in decisions(data)
    last = fake_llm.requests[-1].tool_results
    assert last[-1].startswith("Note 7.") and len(last[-1]) > 3_500  # the newest: as read
    assert last[0].startswith("Note 0.") and len(last[0]) < 1_600  # the oldest: shortened
