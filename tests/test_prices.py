"""Prices (issue 51): the shipped table with its date, the owner's `[llm.prices]` over it, a
dated snapshot priced as its model, the old `llm.*_price_per_million` keys still read, and a
call's cost stored with its usage; our token counts reconciled with the provider's."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent.llm.reconcile import Reconciler
from agent.llm.types import Usage
from gateway.config.prices import PriceTable, shipped_prices
from gateway.config.settings import Settings
from gateway.store import Spender
from tests.fakes.llm import FakeLLM


def test_the_shipped_table_is_dated_and_prices_the_well_known_hosted_models() -> None:
    shipped = shipped_prices()
    assert shipped.date >= "2025-11-30"
    table = PriceTable()
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "claude-sonnet-4-5"):
        assert table.price(model) is not None, model
    assert table.price("llama3.1:8b") is None  # a model on the owner's machine


def test_a_snapshot_or_a_routed_name_costs_what_its_model_does_and_the_owner_wins() -> None:
    table = PriceTable()
    assert table.price("gpt-4o-2024-08-06") == table.price("gpt-4o")
    assert table.price("gpt-4o-mini-2024-07-18") == table.price("gpt-4o-mini")  # not gpt-4o's
    assert table.price("openai/gpt-4o") == table.price("gpt-4o")
    settings = Settings(llm={"prices": {"gpt-4o": {"input": 1, "output": 2}}})
    own = PriceTable(settings.llm.prices)
    assert own.cost("gpt-4o-2024-08-06", input_tokens=1_000_000, output_tokens=1_000_000) == 3.0
    assert own.price("gpt-4o-mini") == table.price("gpt-4o-mini")


def test_cached_and_cache_written_tokens_have_their_own_prices() -> None:
    price = PriceTable().price("claude-sonnet-4-5")
    assert price is not None
    cost = price.cost(
        input_tokens=1_000_000, output_tokens=0, cache_read_tokens=500_000, cache_write_tokens=0
    )
    assert cost == pytest.approx(0.5 * 3.0 + 0.5 * 0.3)
    written = price.cost(input_tokens=1_000_000, output_tokens=0, cache_write_tokens=1_000_000)
    assert written == pytest.approx(3.75)


def test_the_old_price_keys_price_the_configured_model(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        settings = Settings(
            llm={"model": "my-model", "input_price_per_million": 2, "output_price_per_million": 4}
        )
    assert "deprecated" in caplog.text and '[llm.prices."my-model"]' in caplog.text
    cost = PriceTable(settings.llm.prices).cost(
        "my-model", input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=0
    )
    assert cost == pytest.approx(4.0)


async def test_each_calls_cost_is_stored_with_its_usage(
    run_gateway: Any, fake_llm: FakeLLM
) -> None:
    llm = {"prices": {"fake-model": {"input": 100, "output": 1_000}}}
    async with run_gateway(llm=llm) as (gateway, channel):
        await channel.push("hello")
        await channel.wait_for(1)
        await gateway.wait_idle()
        [day] = await gateway.store.usage.since(86_400, by="day")
        [spent] = await gateway.store.usage.spending([Spender("gateway")], since=0)
    expected = (day.input_tokens * 100 + day.output_tokens * 1_000) / 1_000_000
    assert day.cost_usd == pytest.approx(expected) and spent == pytest.approx(expected)


def test_a_difference_from_the_providers_count_is_logged_and_learned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    reconciler = Reconciler(clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="agent.llm.reconcile"):
        reconciler.observe("m", 1_000, 100, Usage(input_tokens=1_030, output_tokens=102))
        assert caplog.records == []  # within 5 %
        reconciler.observe("m", 1_000, 100, Usage(input_tokens=1_500, output_tokens=100))
        reconciler.observe("m", 1_000, 100, Usage(input_tokens=1_500, output_tokens=100))
        now[0] = 601.0
        reconciler.observe("m", 1_000, 100, Usage(input_tokens=1_500, output_tokens=100))
    first, later = [r.getMessage() for r in caplog.records]  # one a model per ten minutes
    assert "prompt 1000 estimated, 1500 reported (+50 %)" in first
    assert "2 of the calls since the last such line differed" in later
    assert 1.2 < reconciler.ratio("m") < 1.5  # the money check scales its estimate by it
    reconciler.observe(
        "n", 1_000, 100, Usage(input_tokens=900, output_tokens=50, estimated_tokens=950)
    )
    assert reconciler.ratio("n") == 1.0  # counted by us: nothing to compare
