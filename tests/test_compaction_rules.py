"""Summarization rules: at least half of the older messages go, the cut lands on a user
message, the word limit follows the window, and a prompt near the window is compacted
before the turn's first model call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.compaction import MIN_KEEP, Compactor, choose_cut
from agent.guards.trace import read_trace
from agent.llm.metered import Charge
from agent.tokens import TokenCounter
from gateway.store import NewMessage, Store
from tests.fakes.llm import FakeLLM, Recorded, Step, text
from tests.test_memory_context import LONG, is_summary_request


def alternating(n: int) -> list[str]:
    return ["user" if i % 2 == 0 else "assistant" for i in range(n)]


def test_at_least_half_is_summarized_and_the_cut_lands_on_a_user_message() -> None:
    for n in range(MIN_KEEP + 4, 30):
        roles = alternating(n)
        cut = choose_cut([10] * n, roles, overhead=0, target=10**9)  # already small enough
        assert cut >= n // 2 and roles[cut] == "user", n
        assert n - cut >= MIN_KEEP - 1
    # A tool chain is never split from its call: the cut moves on to the next user message.
    roles = [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert choose_cut([10] * len(roles), roles, overhead=0, target=10**9) == 6
    # Over the target, more goes, but the last MIN_KEEP messages always stay.
    cut = choose_cut([100] * 12, alternating(12), overhead=0, target=150)
    assert cut == 12 - MIN_KEEP - 1 and alternating(12)[cut] == "user"


@pytest.mark.parametrize(("window", "words"), [(2_048, 192), (4_000, 375), (128_000, 800)])
async def test_the_summary_word_limit_follows_the_window(
    tmp_path: Path, window: int, words: int
) -> None:
    prompts: list[str] = []

    async def summarize(prompt: str, charge: Charge) -> str:
        prompts.append(prompt)
        return "short"

    async with Store(tmp_path / "db.sqlite") as store:
        turns = [
            NewMessage(role, {"role": role, "content": f"{role} {i}: {LONG}"})
            for i, role in enumerate(alternating(10))
        ]
        await store.history.add_checkpoints("t:c1", "turn-1", turns)
        await store.commit_turn(turn_id="turn-1", session_key="t:c1", replies=())
        compactor = Compactor(
            history=store.history, summarize=summarize, counter=TokenCounter(), window=window
        )
        done = await compactor.compact("t:c1", 0, force=True, charge=Charge("t:c1"))
        state, _ = await store.history.load("t:c1", limit=None)
    [prompt] = prompts
    assert f"in at most {words} words" in prompt
    assert done is not None and done.kept and state.summary == "short"
    assert done.summarized >= 5  # at least half of the ten
    assert "user 0:" in prompt and "assistant 9:" not in prompt  # the newest stay in full


async def test_a_prompt_near_the_window_is_compacted_before_the_first_call(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    def respond(request: Recorded) -> Step:
        if is_summary_request(request):
            return text("Earlier you and the user talked about foxes; the code word is AMBER.")
        return text("The code word is AMBER.")

    fake_llm.responder = respond
    async with run_gateway(llm={"context_window": 4_000}) as (gateway, channel):
        old = [
            NewMessage(role, {"role": role, "content": f"{role} {i} AMBER. {LONG}"})
            for i, role in enumerate(alternating(12))
        ]
        await gateway.store.history.add_checkpoints("memory:chat-1", "before", old)
        await gateway.store.commit_turn(turn_id="before", session_key="memory:chat-1", replies=())
        await channel.push("what is the code word?")
        [reply] = await channel.wait_for(1)
        traces = sorted((gateway.settings.data_dir / "traces").glob("*/*.jsonl"))
    first = fake_llm.requests[0]
    [answer] = [r for r in fake_llm.requests if not is_summary_request(r)]
    assert is_summary_request(first)  # before the turn's first model call
    assert "foxes" in answer.system_text
    assert len(answer.user_texts) < 8 and reply.text == "The code word is AMBER."
    codes = [e["code"] for p in traces for e in read_trace(p) if e["event"] == "guard"]
    assert "PREFLIGHT" in codes
