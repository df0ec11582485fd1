"""The model hangs, trickles or lies (threat model rows 22 and 24), with the real openai and
anthropic SDKs against the fake servers: every turn ends within its limits with one answer
or one notice, and a chat whose model call misbehaves does not hold up another chat."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.llm.errors import LLMError, LLMUnavailable
from agent.llm.metered import MIN_ANSWER_CHARS
from gateway.core.messages import OutboundKind
from tests.fakes.llm import SIGN_IN_PAGE, FakeLLM, Recorded, Step, calls, echo, held, text
from tests.test_llm_providers import make, request


async def _sink(_: str) -> None:
    return None


async def streamed_error(fake_llm: FakeLLM, step: Step) -> LLMError:
    """The error a streamed request (the OpenAI wire) meets when the server answers ``step``."""
    fake_llm.queue(step)
    provider = make("openai", fake_llm, timeout=5)
    try:
        with pytest.raises(LLMError) as caught:
            await provider.complete(request(), on_text=_sink)
    finally:
        await provider.aclose()
    return caught.value


@pytest.mark.parametrize(
    ("step", "said"),
    [
        (Step(text="one two three four five six", stream_chunks=6, cut_after=2), "cut off"),
        (
            Step(
                text="one two three four five six", stream_chunks=6, cut_after=2, cut_by_reset=True
            ),
            "cannot connect",
        ),
    ],
    ids=["stream ends cleanly mid-answer", "connection dropped mid-answer"],
)
async def test_a_stream_cut_mid_answer_is_an_error_not_half_an_answer(
    fake_llm: FakeLLM, step: Step, said: str
) -> None:
    error = await streamed_error(fake_llm, step)
    assert isinstance(error, LLMUnavailable)
    assert said in str(error) or said in error.explain()


async def test_an_error_event_in_the_stream_is_an_error_naming_it(fake_llm: FakeLLM) -> None:
    overloaded = {"message": "the model is overloaded", "type": "server_error"}
    step = Step(text="one two three four", stream_chunks=4, stream_error=overloaded)
    assert "the model is overloaded" in str(await streamed_error(fake_llm, step))


@pytest.mark.parametrize(
    "body", [b'{"id": "x", "choices": [{"index": 0, "mess', b"<html>502</html>"]
)
async def test_a_body_that_is_not_json_is_a_typed_error(fake_llm: FakeLLM, body: bytes) -> None:
    fake_llm.queue(Step(raw_body=body))
    provider = make("openai", fake_llm, timeout=5)
    try:
        with pytest.raises(LLMUnavailable) as caught:
            await provider.complete(request())
    finally:
        await provider.aclose()
    assert "could not be read" in caught.value.explain()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_web_page_at_the_base_url_is_said_as_such(
    fake_llm: FakeLLM, kind: str, streamed: bool
) -> None:
    """A base URL that reaches a sign-in page (200, HTML) instead of the model's API: the
    SDKs hand the page back as the answer's text; it is an outage naming the page."""
    fake_llm.web_page = SIGN_IN_PAGE
    provider = make(kind, fake_llm, timeout=5)
    try:
        with pytest.raises(LLMUnavailable) as caught:
            await provider.complete(request(), on_text=_sink if streamed else None)
    finally:
        await provider.aclose()
    said = caught.value.explain()
    if kind == "openai":
        assert said.startswith(
            f'{fake_llm.openai_url} answered /chat/completions with an HTML page ("Sign in"), '
            "not an OpenAI-compatible API."
        )
        assert (
            "Set llm.base_url in config.toml or SWITCHBOARD_LLM__BASE_URL to the model server's /v1 root"
            in said
        )
    else:
        assert said.startswith(
            f'{fake_llm.anthropic_url} answered /v1/messages with an HTML page ("Sign in"), '
            "not Anthropic's API."
        )


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections, reads the request, never answers."""
    held_open: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held_open.append(writer)
        await reader.read(65536)

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    for writer in held_open:
        writer.close()
    server.close()
    await server.wait_closed()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_server_that_never_answers_times_out(
    silent_server: str, kind: str, fake_llm: FakeLLM
) -> None:
    fake_llm.port = int(silent_server.rsplit(":", 1)[1])  # both SDKs, pointed at the silence
    provider = make(kind, fake_llm, timeout=0.5)
    try:
        with pytest.raises(LLMUnavailable) as caught:
            await asyncio.wait_for(provider.complete(request()), 10)
    finally:
        await provider.aclose()
    assert "did not answer" in caught.value.explain() or "timed out" in str(caught.value)


FAULTS: dict[str, tuple[list[Step], str]] = {
    # fault in chat a: the steps the model server plays, what chat a must see
    "invalid JSON body": ([Step(raw_body=b'{"choices": [')], "notice"),
    "HTML instead of JSON": ([Step(raw_body=b"<html>Bad gateway</html>")], "notice"),
    "unknown finish reason": (
        [Step(text="An answer all the same.", finish_reason="banana")],
        "An answer all the same.",
    ),
    "content filter, no text": ([Step(text="", finish_reason="content_filter")] * 3, "notice"),
    "tool that does not exist": (
        [calls(("launch_rockets", {"count": 3})), text("No rockets here; done.")],
        "No rockets here; done.",
    ),
    "arguments not an object": (
        [Step(calls=(("write_file", "[1, 2]"),)), text("I could not write it.")],
        "I could not write it.",
    ),
    "arguments a bare string": (
        [Step(calls=(("write_file", '"a.txt"'),)), text("I could not write it.")],
        "I could not write it.",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_a_lying_model_ends_the_turn_with_one_answer_and_other_chats_go_on(
    run_gateway: Any, fake_llm: FakeLLM, fault: str
) -> None:
    steps, expected = FAULTS[fault]
    script = deque(steps)

    def respond(request: Recorded) -> Step:  # the faults go to chat a only
        if script and any("a.txt" in said for said in request.user_texts):
            return script.popleft()
        return echo(request)

    fake_llm.responder = respond
    async with run_gateway() as (gateway, channel):
        await channel.push("please write a.txt", chat_id="a")
        await channel.push("are you there?", chat_id="b")
        [other] = await channel.wait_for(1, chat_id="b")
        [answer] = await channel.wait_for(1, chat_id="a")
        await gateway.wait_idle()
        workspace = gateway.settings.workspace_dir
    assert other.text.startswith("echo: ")
    if expected == "notice":
        assert answer.kind is OutboundKind.NOTICE
    else:
        assert answer.text.startswith(expected)
    assert len(channel.texts("a")) == 1 and len(channel.texts("b")) == 1  # nothing doubled
    assert not (workspace / "a.txt").exists()
    for tool_result in [r for req in fake_llm.requests for r in req.tool_results]:
        assert "launch_rockets" not in tool_result or "read_file" in tool_result


async def test_a_model_that_never_answers_gets_a_notice_while_another_chat_is_answered(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(held(asyncio.Event(), "never sent"))  # released only when the fake stops
    async with run_gateway(llm={"timeout_seconds": 1.0}) as (gateway, channel):
        await channel.push("a slow one", chat_id="a")
        await fake_llm.wait_for_requests(1)
        await channel.push("quick one", chat_id="b")
        [quick] = await channel.wait_for(1, chat_id="b")
        assert channel.texts("a") == []
        [notice] = await channel.wait_for(1, chat_id="a")
        await gateway.wait_idle()
    assert quick.text == "echo: quick one"
    assert notice.kind is OutboundKind.NOTICE and "did not answer" in notice.text
    assert len(channel.texts("a")) == 1


async def test_a_ten_megabyte_answer_is_cut_to_a_bounded_reply(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.queue(text("y" * 10_000_000))
    async with run_gateway() as (gateway, channel):
        await channel.push("tell me everything")
        [reply] = await channel.wait_for(1)
        await channel.push("and again?")
        await channel.wait_for(2)
        await gateway.wait_idle()
    limit = max(MIN_ANSWER_CHARS, gateway.settings.llm.max_tokens * 12)
    assert limit < len(reply.text) < limit + 200
    assert "cut at" in reply.text
    # the history the next turn sends is bounded too
    assert len(json.dumps(fake_llm.requests[1].body)) < limit + 50_000
