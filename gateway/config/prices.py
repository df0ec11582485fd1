"""What a model call costs: the owner's prices over a shipped table of hosted models' prices.

Prices are US dollars per million tokens: ``input`` (prompt tokens the provider did not have
cached), ``cached_input`` (prompt tokens read from its cache; default: ``input``), ``output``,
and ``cache_write`` (prompt tokens written to Anthropic's cache, 1.25 times ``input``;
default: ``input``). ``gateway/config/prices.json`` holds the public list prices of OpenAI's
and Anthropic's hosted models as of its ``date``; ``[llm.prices."<model>"]`` adds a model
or replaces a shipped price (prices change: the owner's word wins).

A model is looked up by the name its provider answers with, in both tables as one (the
owner's entries replacing the shipped ones of the same name): exactly, then the longest
priced name it begins with followed by ``-`` (a dated snapshot, ``gpt-4o-2024-08-06``, costs
what ``gpt-4o`` does, and ``gpt-4o-mini`` what ``gpt-4o-mini`` does); a routing prefix
(``openai/gpt-4o`` on OpenRouter) is dropped when the whole name is not priced. A
model found nowhere (a model on the owner's own machine) has no price: its calls cost
nothing as far as the money caps know, and the status page says so.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

SHIPPED = Path(__file__).with_name("prices.json")
MILLION = 1_000_000


class ModelPrice(BaseModel):
    """One model's prices in US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)  # required: prompt tokens not read from the provider's cache
    cached_input: float | None = Field(default=None, ge=0)  # cached prompt tokens; default: input
    output: float = Field(ge=0)  # required: answer tokens (a reasoning model's hidden ones too)
    cache_write: float | None = Field(default=None, ge=0)  # cache writes; default: input

    def cost(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> float:
        """US dollars; ``input_tokens`` include the cached and cache-written ones (the way
        agent.llm.types.Usage counts them for both providers)."""
        cached = self.input if self.cached_input is None else self.cached_input
        written = self.input if self.cache_write is None else self.cache_write
        fresh = max(0, input_tokens - cache_read_tokens - cache_write_tokens)
        return (
            fresh * self.input
            + cache_read_tokens * cached
            + cache_write_tokens * written
            + output_tokens * self.output
        ) / MILLION


@dataclass(frozen=True, slots=True)
class ShippedPrices:
    date: str  # when the prices were taken from the providers' pages
    models: Mapping[str, ModelPrice]


@functools.cache
def shipped_prices() -> ShippedPrices:
    """The table that ships with Switchboard (read once)."""
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    models = {name: ModelPrice(**price) for name, price in data["models"].items()}
    return ShippedPrices(str(data["date"]), models)


def _lookup(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    found = prices.get(model)
    if found is not None:
        return found
    prefixes = [name for name in prices if model.startswith(f"{name}-")]
    return prices[max(prefixes, key=len)] if prefixes else None


class PriceTable:
    """Prices per model: ``[llm.prices]`` first, then the shipped table. One table is shared
    by every model of the gateway, so a change of ``[llm.prices]`` (:meth:`use`) prices
    their next calls, the running agents' too."""

    def __init__(self, own: Mapping[str, ModelPrice] | None = None) -> None:
        shipped = shipped_prices()
        self.date = shipped.date  # the shipped table's
        self._prices = {**shipped.models, **(own or {})}
        self._found: dict[str, ModelPrice | None] = {}

    def use(self, own: Mapping[str, ModelPrice]) -> None:
        """``[llm.prices]`` changed: price from it from now on."""
        self._prices = {**shipped_prices().models, **own}
        self._found = {}

    def price(self, model: str) -> ModelPrice | None:
        """``model``'s price, or ``None`` when neither table knows it."""
        if model not in self._found:
            self._found[model] = self._find(model)
        return self._found[model]

    def _find(self, model: str) -> ModelPrice | None:
        names = [model]
        if "/" in model:  # openai/gpt-4o, as a router names it
            names.append(model.rpartition("/")[2])
        for name in names:
            found = _lookup(name, self._prices)
            if found is not None:
                return found
        return None

    def cost(
        self,
        model: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> float | None:
        """US dollars at ``model``'s price, or ``None`` when it has none."""
        price = self.price(model)
        if price is None:
            return None
        return price.cost(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
        )
