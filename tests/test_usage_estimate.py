"""A server that reports no token usage (llama.cpp's server in a stream) still has its tokens
counted: with tiktoken, marked as counted by us in the trace, the usage table and the
status page, and charged to the person (so per-person limits can trip)."""

from __future__ import annotations

from typing import Any

from agent.guards.trace import read_trace
from gateway.web.status import snapshot
from tests.fakes.llm import FakeLLM


async def test_tokens_a_server_does_not_report_are_counted_and_marked(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.report_usage = False
    async with run_gateway() as (gateway, channel):
        await channel.push("hello there, how are you today?")
        [reply] = await channel.wait_for(1)
        await gateway.wait_idle()
        [day] = await gateway.store.usage.since(86_400, by="day")
        person = await gateway.store.usage.by_principal("memory:user-1", since=0, turns_since=0)
        status = await snapshot(gateway)
        data = gateway.settings.data_dir
    assert reply.text == "echo: hello there, how are you today?"
    assert day.input_tokens > 100 and day.output_tokens > 5  # the prompt, the answer
    assert day.estimated_tokens == day.input_tokens + day.output_tokens
    assert person.tokens == day.estimated_tokens  # what the per-person limit reads
    [llm] = [e for p in data.glob("traces/*/*.jsonl") for e in read_trace(p) if e["event"] == "llm"]
    assert llm["estimated"] is True and llm["input_tokens"] == day.input_tokens
    [turn] = status["recent_turns"]
    assert turn["estimated"] is True and turn["input_tokens"] == day.input_tokens
    assert status["usage"]["by_day"][0]["estimated_tokens"] == day.estimated_tokens


async def test_reported_usage_is_taken_as_reported(run_gateway: Any, fake_llm: FakeLLM) -> None:
    async with run_gateway() as (gateway, channel):
        await channel.push("hello")
        await channel.wait_for(1)
        await gateway.wait_idle()
        [day] = await gateway.store.usage.since(86_400, by="day")
    assert day.estimated_tokens == 0
    assert day.input_tokens + day.output_tokens == sum(fake_llm.reported)
