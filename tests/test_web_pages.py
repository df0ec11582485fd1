"""Long pages fit a token budget: chunked on lines, condensed in parallel (bounded), combined in
page order; cut instead when there is no summarizer."""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict

import pytest

from agent.llm.metered import Charge, MeteredModel, TurnUsage
from agent.llm.slots import ModelSlots
from agent.web.pages import Budget, approx_tokens, chunk_text, fit, llm_summarizer
from tests.fakes.llm import FakeLLM, text


def long_page(parts: int, chars_per_part: int = 1_200) -> str:
    """``parts`` sections, each a heading plus lines, together ``parts * chars_per_part`` long."""
    sections = []
    for n in range(1, parts + 1):
        line = f"section-{n} sentence with a [link {n}](https://example.org/{n}).\n"
        body = line * (chars_per_part // len(line))
        sections.append(f"## Section {n}\n{body}")
    return "".join(sections)


class GatedSummarizer:
    """Condenses a chunk only when the test releases its part; tracks calls in flight."""

    def __init__(self) -> None:
        self.release: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self.started: list[int] = []
        self.instructions: list[str] = []
        self.active = 0
        self.peak = 0
        self.changed = asyncio.Condition()

    async def __call__(self, instruction: str, chunk: str) -> str:
        match = re.search(r"part (\d+) of", instruction)
        assert match is not None
        part = int(match.group(1))
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.started.append(part)
        self.instructions.append(instruction)
        async with self.changed:
            self.changed.notify_all()
        await self.release[part].wait()
        self.active -= 1
        first = re.search(r"section-\d+", chunk)
        return f"summary of {first.group(0) if first else '?'}"

    async def wait_started(self, part: int) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: part in self.started), 5)


def test_chunks_split_between_lines_within_the_size() -> None:
    page = long_page(5)
    chunks = chunk_text(page, 1_000)
    assert "".join(chunks) == page
    assert all(len(c) <= 1_000 for c in chunks)
    assert all(c.endswith("\n") for c in chunks)  # no line was split
    one_long_line = "x" * 2_500
    assert [len(c) for c in chunk_text(one_long_line, 1_000)] == [1_000, 1_000, 500]


async def test_a_page_within_budget_is_returned_unchanged() -> None:
    summarizer = GatedSummarizer()
    page = long_page(2)
    result = await fit(page, budget=Budget(tokens=2_000), purpose="", summarize=summarizer)
    assert result.text == page
    assert (result.parts, result.cut) == (0, False)
    assert summarizer.started == []


async def test_without_a_summarizer_a_long_page_is_cut_at_the_budget() -> None:
    page = long_page(10)
    result = await fit(page, budget=Budget(tokens=500), purpose="", summarize=None)
    assert result.cut
    assert len(result.text) <= 2_000
    assert page.startswith(result.text)
    assert result.original_chars == len(page)


async def test_chunks_are_condensed_in_parallel_within_the_bound_and_combined_in_order() -> None:
    summarizer = GatedSummarizer()
    page = long_page(6, chars_per_part=1_000)
    budget = Budget(tokens=600, chunk_tokens=250, max_chunks=10, concurrency=2)
    task = asyncio.create_task(
        fit(page, budget=budget, purpose="Keep what answers: when to plant?", summarize=summarizer)
    )
    await summarizer.wait_started(2)
    assert summarizer.started == [1, 2]  # two at once, the third waits for a slot
    for part in (2, 3, 4, 5, 6, 1):  # finish out of order, part 1 last
        await summarizer.wait_started(part)
        summarizer.release[part].set()
    result = await asyncio.wait_for(task, 5)
    assert summarizer.peak == 2
    assert result.parts == 6
    headers = re.findall(
        r"=== part (\d) of 6 \(condensed\) ===\nsummary of (section-\d)", result.text
    )
    assert headers == [(str(n), f"section-{n}") for n in range(1, 7)]
    share = re.search(r"under (\d+) characters", summarizer.instructions[0])
    assert share is not None and int(share.group(1)) * 6 <= 600 * 4
    assert "when to plant?" in summarizer.instructions[0]
    assert approx_tokens(result.text) <= 600


async def test_summaries_longer_than_their_share_are_cut_and_a_failed_part_falls_back() -> None:
    async def summarize(instruction: str, chunk: str) -> str:
        if "part 2 of" in instruction:
            raise RuntimeError("provider overloaded")
        return "word " * 5_000  # ignores the limit

    page = long_page(4, chars_per_part=1_000)
    result = await fit(
        page,
        budget=Budget(tokens=500, chunk_tokens=250, concurrency=4),
        purpose="",
        summarize=summarize,
    )
    assert result.parts == 4
    assert len(result.text) <= 500 * 4 + 200
    assert "this part could not be condensed and was cut" in result.text
    assert "section-2" in result.text  # the failed part kept its own beginning


async def test_at_most_max_chunks_are_condensed_and_the_rest_is_reported_unread() -> None:
    calls = 0

    async def summarize(instruction: str, chunk: str) -> str:
        nonlocal calls
        calls += 1
        return "short"

    page = long_page(20, chars_per_part=1_000)
    result = await fit(
        page,
        budget=Budget(tokens=500, chunk_tokens=250, max_chunks=3),
        purpose="",
        summarize=summarize,
    )
    assert calls == 3
    assert result.cut
    assert re.search(r"\[\.\.\. \d+ more characters of the page were not read\]", result.text)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_llm_summarizer_sends_one_tool_less_request_per_chunk(
    fake_llm: FakeLLM, provider: str
) -> None:
    from agent.llm.factory import create_provider
    from gateway.config.settings import LLMSettings

    base = fake_llm.openai_url if provider == "openai" else fake_llm.anthropic_url
    llm = create_provider(
        LLMSettings(
            provider=provider, model="fake", base_url=base, api_key="sk-test", max_retries=0
        )  # type: ignore[arg-type]
    )
    fake_llm.queue(text("Tomatoes need sun. [guide](https://example.org/1)"))
    meter = TurnUsage()
    model = MeteredModel(llm, slots=ModelSlots(1), context_window=8_000)
    summarize = llm_summarizer(model)(Charge("memory:chat-1", "turn-1", meter=meter))
    try:
        summary = await summarize("Keep the main points.", "## Tomatoes\nlong text")
    finally:
        await llm.aclose()
    assert summary == "Tomatoes need sun. [guide](https://example.org/1)"
    [page] = meter.entries()  # charged to the turn that fetched the page
    assert page.purpose == "page" and page.usage.input_tokens > 0
    [request] = fake_llm.requests
    assert request.tool_names == []
    assert "untrusted" in request.system_text
    assert "<excerpt>\n## Tomatoes\nlong text\n</excerpt>" in request.last_user_text
