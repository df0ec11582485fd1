"""Every model call of a turn fits the context window: prompt plus the output asked for.

The fake server is strict here (as vLLM and llama.cpp are): a request whose prompt and
max_tokens together pass its window is refused with a context-length error.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import pytest

from agent.guards.trace import read_trace
from agent.llm.errors import is_context_overflow, window_from_error
from agent.llm.server_facts import known_window
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


# -- a window smaller than configured (a local server's --ctx-size) ---------------------------

LONG = "Please summarise this report. " + "The harvest was late but plentiful this year. " * 700


def answered(request: Recorded) -> Step:
    return text(f"read {len(request.last_user_text)} characters")


@pytest.mark.parametrize("style", ["openai", "llama.cpp"])
async def test_a_message_over_a_smaller_window_is_cut_and_the_chat_goes_on(
    run_gateway: Any, fake_llm: FakeLLM, style: Literal["openai", "llama.cpp"]
) -> None:
    """llm.context_window says 128,000 (the default nobody changed); the server has 6,000.
    The long message is refused once, the window its server names is used from then on, the
    message is cut to fit, and the short messages after it are answered as usual."""
    fake_llm.context_window = 6_000
    fake_llm.refusal_style = style
    fake_llm.responder = answered
    async with run_gateway() as (gateway, channel):
        await channel.push(LONG)
        [first] = await channel.wait_for(1)
        await channel.push("hi")
        [_, second] = await channel.wait_for(2)
        data = gateway.settings.data_dir
    assert first.kind is OutboundKind.REPLY, first.text
    refused, cut, *rest = fake_llm.requests
    assert fake_llm.context_window < prompt(refused) + asked(refused)  # the one refusal
    assert "characters left out: the message was longer than the model's context window " in (
        cut.last_user_text
    )
    assert "(6000 tokens, llm.context_window)" in cut.last_user_text
    assert cut.last_user_text.startswith("Please summarise this report.")
    assert all(prompt(r) + asked(r) <= 6_000 for r in [cut, *rest])
    assert second.kind is OutboundKind.REPLY and second.text == "read 2 characters"
    assert first.text.count("Note: your message was too long") == 1  # told once, not again
    assert rest[-1].last_user_text == "hi"  # the long message never wedges the chat
    assert decisions(data).count("OVERFLOW") == 1


async def test_a_correct_window_cuts_a_long_message_before_sending_it(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """The person is told under the answer, in words, that the middle was left out."""
    fake_llm.context_window = 6_000
    fake_llm.responder = answered
    async with run_gateway(llm={"context_window": 6_000}) as (_gateway, channel):
        await channel.push(LONG)
        [reply] = await channel.wait_for(1)
    [request] = fake_llm.requests  # nothing refused
    assert reply.kind is OutboundKind.REPLY
    assert prompt(request) + asked(request) <= 6_000
    assert "only its start and end were read" in request.last_user_text
    answer, note = reply.text.split("\n\n")
    assert answer == f"read {len(request.last_user_text)} characters"
    found = re.fullmatch(
        r"Note: your message was too long for the model's context window; I read its start "
        r"and its end and left out the middle \(about ([\d,]+) words\)\.",
        note,
    )
    assert found is not None, note
    words_read = len(request.last_user_text.split())
    assert int(found[1].replace(",", "")) == pytest.approx(len(LONG.split()) - words_read, abs=40)


async def test_a_refusal_that_names_no_window_is_answered_with_a_smaller_prompt(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """Some servers only say "too long": each retry asks with a quarter of the budget."""
    fake_llm.context_window = 8_000
    fake_llm.refusal_style = "bare"
    fake_llm.responder = answered
    async with run_gateway() as (_gateway, channel):
        await channel.push(LONG * 4)
        [reply] = await channel.wait_for(1)
    assert reply.kind is OutboundKind.REPLY, reply.text
    last = fake_llm.requests[-1]
    assert prompt(last) + asked(last) <= 8_000


async def test_what_cannot_fit_at_all_names_the_setting_and_new(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    """A window too small even for the instructions: the notice says what to change."""
    fake_llm.context_window = 300
    async with run_gateway() as (_gateway, channel):
        await channel.push("hello")
        [notice] = await channel.wait_for(1)
    assert notice.kind is OutboundKind.NOTICE
    assert "300 tokens, its server says; set by llm.context_window" in notice.text
    assert "/new to start a fresh conversation" in notice.text


@pytest.mark.parametrize(
    ("message", "window"),
    [
        (  # OpenAI, vLLM, llama-cpp-python
            "This model's maximum context length is 8192 tokens. However, you requested "
            "9000 tokens (8000 in the messages, 1000 in the completion).",
            8_192,
        ),
        (  # llama.cpp's server, as the openai SDK renders its error body
            "Error code: 400 - {'error': {'code': 400, 'message': 'the request exceeds the "
            "available context size, try increasing it', 'type': 'exceed_context_size_error',"
            " 'n_prompt_tokens': 9000, 'n_ctx': 4096}}",
            4_096,
        ),
        ("prompt is too long: 208000 tokens > 200000 maximum", 200_000),  # Anthropic
        ("Requested tokens (3000) exceed context window of 2048", 2_048),
        ("the prompt is too long", None),
    ],
)
def test_the_window_a_refusal_names(message: str, window: int | None) -> None:
    assert is_context_overflow(message)
    assert window_from_error(message) == window


def test_hosted_models_have_their_published_windows() -> None:
    assert known_window("gpt-4o-mini") == known_window("gpt-4o")
    found = known_window("claude-sonnet-4-5")
    assert found is not None and found.tokens == 200_000
    assert known_window("openai/gpt-4.1-mini") is not None  # as a router names it
    assert known_window("llama3.1") is None  # a local model: its server is asked
