"""``/context`` in any chat: what the next prompt is made of, in tokens, and what the provider
cached on the last turn."""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.llm import FakeLLM
from tests.test_memory_context import chat


def tokens_of(answer: str, part: str) -> int:
    match = re.search(rf"- {re.escape(part)}[^:]*: ([\d,]+) tokens", answer)
    assert match is not None, (part, answer)
    return int(match.group(1).replace(",", ""))


async def test_context_shows_the_parts_of_the_next_prompt_and_the_cache(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    settings: dict[str, Any] = {"llm": {"provider": "anthropic", "context_window": 50_000}}
    async with run_gateway(**settings) as (gateway, channel):
        (gateway.settings.workspace_dir / "MEMORY.md").write_text(
            "# Memory\n\n- The user's name is Ada and she keeps bees.\n"
        )
        await chat(channel, ["/context"])
        before = channel.texts()[-1]
        await chat(channel, ["hello there", "and again, a little longer this time"])
        await chat(channel, ["/context"])
        after = channel.texts()[-1]
    assert "Cache: no turn reported yet." in before
    assert tokens_of(before, "history") == 0
    assert tokens_of(after, "history") > 0 and "history (4 messages)" in after
    assert tokens_of(after, "memory") > 0
    assert tokens_of(after, "system") > 100 and tokens_of(after, "tools") > 100
    assert re.search(r"total: [\d,]+ tokens of a 50,000-token window", after)
    assert re.search(
        r"Cache, last turn: of its [\d,]+ prompt tokens .* [1-9][\d,]* were read", after
    )
