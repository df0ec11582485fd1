"""The real openai and anthropic SDKs against the local fake API server."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from agent.llm.anthropic_provider import AnthropicProvider
from agent.llm.base import LLMProvider
from agent.llm.errors import LLMAuthError, LLMContextOverflow, LLMRateLimited, LLMUnavailable
from agent.llm.openai_provider import OpenAIProvider
from agent.llm.types import ChatMessage, LLMRequest, SystemPrompt, ToolCall, ToolSpec
from tests.fakes.llm import FakeLLM, Step, calls, error, held, text

TOOLS = (
    ToolSpec(
        "read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
    ),
)


def make(kind: str, fake: FakeLLM, *, retries: int = 0, timeout: float = 10.0) -> LLMProvider:
    if kind == "openai":
        return OpenAIProvider(
            model="m",
            api_key="sk-test",
            base_url=fake.openai_url,
            max_retries=retries,
            timeout=timeout,
        )
    return AnthropicProvider(
        model="m",
        api_key="sk-ant-test",
        base_url=fake.anthropic_url,
        max_retries=retries,
        timeout=timeout,
    )


def request(*messages: ChatMessage) -> LLMRequest:
    return LLMRequest(
        SystemPrompt("stable part", "dynamic part"),
        messages or (ChatMessage("user", "hi"),),
        TOOLS,
        256,
    )


@pytest.fixture(params=["openai", "anthropic"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_text_answer_and_usage(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(text("hello back"))
    provider = make(kind, fake_llm)
    response = await provider.complete(request())
    await provider.aclose()
    assert response.text == "hello back"
    assert response.tool_calls == ()
    assert response.usage.input_tokens > 0
    sent = fake_llm.requests[0]
    assert "stable part" in sent.system_text and "dynamic part" in sent.system_text
    assert sent.tool_names == ["read_file"]


async def test_tool_calls_round_trip(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(calls(("read_file", {"path": "a.txt"})), text("done"))
    provider = make(kind, fake_llm)
    first = await provider.complete(request())
    [call] = first.tool_calls
    assert call.name == "read_file"
    assert json.loads(call.arguments) == {"path": "a.txt"}
    history = (
        ChatMessage("user", "read a.txt"),
        first.as_message(),
        ChatMessage("tool", "file body", tool_call_id=call.id, name="read_file"),
    )
    second = await provider.complete(request(*history))
    await provider.aclose()
    assert second.text == "done"
    assert fake_llm.requests[1].tool_results == ["file body"]


async def test_streaming_delivers_fragments_and_the_same_result(
    kind: str, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(
        Step(text="streamed answer text", stream_chunks=4), calls(("read_file", {"path": "x"}))
    )
    provider = make(kind, fake_llm)
    fragments: list[str] = []

    async def sink(fragment: str) -> None:
        fragments.append(fragment)

    response = await provider.complete(request(), on_text=sink)
    assert len(fragments) > 1
    assert "".join(fragments) == response.text == "streamed answer text"
    tool_response = await provider.complete(request(), on_text=sink)
    await provider.aclose()
    [call] = tool_response.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("read_file", {"path": "x"})


async def test_a_reasoning_model_is_asked_in_the_words_it_takes(
    fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenAI's reasoning models refuse max_tokens and a temperature of ours: the first
    request is answered all the same, and every later one goes as they take it at once."""
    fake_llm.reasoning = True
    fake_llm.queue(text("thought it through"), Step(text="again", stream_chunks=2))
    provider = make("openai", fake_llm)
    asked = replace(request(), temperature=0.2)
    first = await provider.complete(asked)
    second = await provider.complete(asked, on_text=_ignore)
    await provider.aclose()
    assert (first.text, second.text) == ("thought it through", "again")
    assert len(fake_llm.requests) == 2  # nothing refused after the first answer
    for sent in fake_llm.requests:
        assert sent.body["max_completion_tokens"] == 256
        assert "max_tokens" not in sent.body and "temperature" not in sent.body
    assert "refused llm.temperature" in caplog.text


async def _ignore(fragment: str) -> None:
    pass


async def test_rate_limit_is_retried_after_retry_after(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(error(429, "slow down", retry_after_ms=20), text("finally"))
    provider = make(kind, fake_llm, retries=2)
    response = await provider.complete(request())
    await provider.aclose()
    assert response.text == "finally"
    assert [r.headers.get("x-stainless-retry-count") for r in fake_llm.requests] == ["0", "1"]


async def test_exhausted_rate_limit_is_typed(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(
        error(429, "slow down", retry_after_ms=5), error(429, "slow down", retry_after_ms=5)
    )
    provider = make(kind, fake_llm, retries=1)
    with pytest.raises(LLMRateLimited) as caught:
        await provider.complete(request())
    await provider.aclose()
    assert caught.value.retry_after == pytest.approx(0.005)


async def test_server_errors_become_unavailable(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(error(503, "overloaded"))
    provider = make(kind, fake_llm)
    with pytest.raises(LLMUnavailable):
        await provider.complete(request())
    await provider.aclose()


async def test_timeout_becomes_unavailable(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(held(asyncio.Event(), "too late"))  # released when the fake stops
    provider = make(kind, fake_llm, timeout=0.2)
    with pytest.raises(LLMUnavailable):
        await provider.complete(request())
    await provider.aclose()


async def test_bad_key_is_an_auth_error(kind: str, fake_llm: FakeLLM) -> None:
    fake_llm.queue(error(401, "invalid api key"))
    provider = make(kind, fake_llm)
    with pytest.raises(LLMAuthError):
        await provider.complete(request())
    await provider.aclose()


async def test_context_overflow_is_recognised(kind: str, fake_llm: FakeLLM) -> None:
    message = (
        "This model's maximum context length is 8192 tokens"
        if kind == "openai"
        else "prompt is too long: 210000 tokens > 200000 maximum"
    )
    fake_llm.queue(
        error(400, message, code="context_length_exceeded" if kind == "openai" else None)
    )
    provider = make(kind, fake_llm)
    with pytest.raises(LLMContextOverflow):
        await provider.complete(request())
    await provider.aclose()


async def test_anthropic_marks_cache_breakpoints(fake_llm: FakeLLM) -> None:
    fake_llm.queue(text("ok"))
    provider = make("anthropic", fake_llm)
    await provider.complete(
        request(ChatMessage("user", "a"), ChatMessage("assistant", "b"), ChatMessage("user", "c"))
    )
    await provider.aclose()
    body = fake_llm.requests[0].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["system"][1]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_anthropic_merges_tool_results_into_one_user_turn(fake_llm: FakeLLM) -> None:
    fake_llm.queue(text("ok"))
    provider = make("anthropic", fake_llm)
    calls_made = (
        ToolCall("t1", "read_file", '{"path": "a"}'),
        ToolCall("t2", "read_file", '{"path": "b"}'),
    )
    await provider.complete(
        request(
            ChatMessage("user", "read both"),
            ChatMessage("assistant", "", tool_calls=calls_made),
            ChatMessage("tool", "A", tool_call_id="t1"),
            ChatMessage("tool", "B", tool_call_id="t2", is_error=True),
        )
    )
    await provider.aclose()
    roles = [m["role"] for m in fake_llm.requests[0].body["messages"]]
    assert roles == ["user", "assistant", "user"]
    results = fake_llm.requests[0].body["messages"][2]["content"]
    assert [(b["tool_use_id"], b["is_error"]) for b in results[:2]] == [("t1", False), ("t2", True)]


async def test_a_failed_tool_result_is_marked_as_an_error(kind: str, fake_llm: FakeLLM) -> None:
    """The model must not have to guess failure from the wording: Anthropic's is_error, and
    for OpenAI-compatible servers (no such field) a marker the result starts with."""
    fake_llm.queue(text("ok"))
    provider = make(kind, fake_llm)
    call = ToolCall("call_1", "read_file", '{"path": "a.txt"}')
    call_2 = ToolCall("call_2", "read_file", '{"path": "b.txt"}')
    await provider.complete(
        request(
            ChatMessage("user", "read both"),
            ChatMessage("assistant", "", tool_calls=(call, call_2)),
            ChatMessage("tool", "a.txt does not exist", "call_1", name="read_file", is_error=True),
            ChatMessage("tool", "contents of b", "call_2", name="read_file"),
        )
    )
    await provider.aclose()
    failed, worked = fake_llm.requests[0].tool_results
    if kind == "openai":
        assert failed == "[tool error] a.txt does not exist"
    else:
        blocks = fake_llm.requests[0].body["messages"][-1]["content"]
        assert [b.get("is_error") for b in blocks] == [True, False]
        assert failed == "a.txt does not exist"
    assert worked == "contents of b"
