"""The control center's usage and cost: tokens per day, person, conversation and model over
the last days, with the estimated cost where the model's prices are known.

Prices are those of ``[llm]`` (``input_price_per_million``, ``output_price_per_million``,
``cached_input_price_per_million``) and apply to the model ``llm.model`` names. Tokens of
another model (a fallback, an agent's own) are counted and shown without a cost, and the
cost of a group that used one says it is incomplete.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.store import ModelTotals, UsageGroup
from gateway.web.names import Names

if TYPE_CHECKING:
    from gateway.config.llm import LLMSettings
    from gateway.config.settings import Settings
    from gateway.web.view import GatewayView

DAYS = 30


def price_table(settings: Settings) -> dict[str, LLMSettings]:
    """The prices of each model that has them, by the model's name."""
    llm = settings.llm
    priced = llm.input_price_per_million is not None or llm.output_price_per_million is not None
    return {llm.model: llm} if priced else {}


@dataclass(slots=True)
class _Cost:
    usd: float = 0.0
    priced: bool = False  # some of it has a price
    unpriced: bool = False  # some of it has none


def costs(rows: list[ModelTotals], prices: dict[str, LLMSettings]) -> dict[str, _Cost]:
    """Each group's estimated cost, adding up its models at each one's prices."""
    found: defaultdict[str, _Cost] = defaultdict(_Cost)
    for row in rows:
        cost = found[row.key]
        llm = prices.get(row.model)
        usd = (
            None
            if llm is None
            else llm.cost(
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                cached_tokens=row.cache_read_tokens,
            )
        )
        if usd is None:
            cost.unpriced = cost.unpriced or bool(row.input_tokens or row.output_tokens)
        else:
            cost.usd += usd
            cost.priced = True
    return found


async def report(gateway: GatewayView, *, days: int = DAYS) -> dict[str, Any]:
    store = gateway.store
    seconds = days * 86_400
    prices = price_table(gateway.settings)
    names = await Names.load(store)

    async def grouped(by: UsageGroup, label: Any) -> list[dict[str, Any]]:
        priced = costs(await store.usage.per_model(seconds, by=by), prices)
        rows = []
        for totals in await store.usage.since(seconds, by=by):
            cost = priced.get(totals.key, _Cost())
            rows.append(
                {
                    "key": totals.key,
                    "label": label(totals.key),
                    "turns": totals.turns,
                    "input_tokens": totals.input_tokens,
                    "output_tokens": totals.output_tokens,
                    "cache_read_tokens": totals.cache_read_tokens,
                    "estimated_tokens": totals.estimated_tokens,
                    "cost": cost.usd if cost.priced else None,
                    "cost_incomplete": cost.priced and cost.unpriced,
                }
            )
        return rows

    def biggest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(rows, key=lambda r: -(r["input_tokens"] + r["output_tokens"]))

    by_day = await grouped("day", lambda key: key)
    return {
        "days": days,
        "priced": sorted(prices),
        "by_day": sorted(by_day, key=lambda r: r["key"]),
        "by_person": biggest(await grouped("principal", names.person)),
        "by_chat": biggest(await grouped("session", lambda key: names.session(key).title)),
        "by_model": biggest(await grouped("model", lambda key: key)),
    }
