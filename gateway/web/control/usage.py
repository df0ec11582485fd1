"""The control center's usage and cost: tokens and US dollars per day, person,
conversation, agent and model over the last days. A day is the owner's (``user.timezone``),
as for the money caps and ``/usage``, not the server's or the browser's.

The cost of each model call is stored with it, at the prices in effect when it was made
(``[llm.prices]`` over the shipped table, gateway/config/prices.py); a group some of whose
calls had no price says so (``cost_incomplete``), and one with no priced call shows none.
Whether the models in use have a price is told apart (``unpriced``): a price set after the
calls so far prices the next ones, not those.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from gateway.core.schedule_spec import zone
from gateway.store import UsageGroup
from gateway.web.control.names import Names

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

DAYS = 30


async def report(gateway: GatewayView, *, days: int = DAYS) -> dict[str, Any]:
    store = gateway.store
    seconds = days * 86_400
    names = await Names.load(store)

    async def grouped(by: UsageGroup, label: Any) -> list[dict[str, Any]]:
        return [
            {
                "key": totals.key,
                "label": label(totals.key),
                "turns": totals.turns,
                "input_tokens": totals.input_tokens,
                "output_tokens": totals.output_tokens,
                "cache_read_tokens": totals.cache_read_tokens,
                "estimated_tokens": totals.estimated_tokens,
                "cost": totals.cost_usd,
            }
            for totals in await store.usage.since(seconds, by=by)
        ]

    def biggest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            rows, key=lambda r: (-(r["cost"] or 0.0), -(r["input_tokens"] + r["output_tokens"]))
        )

    by_day = await grouped("day", lambda key: key)
    return {
        "days": days,
        # the owner's today (user.timezone), where the chart of days ends, as the days are theirs
        "today": f"{datetime.now(zone(gateway.settings.timezone)):%Y-%m-%d}",
        "priced": any(row["cost"] is not None for row in by_day),  # a call so far had a price
        # the models in use now without a price (their next calls will count as free)
        "unpriced": [m.name for m in gateway.model_states() if not m.priced],
        "by_day": sorted(by_day, key=lambda r: r["key"]),
        "by_person": biggest(await grouped("person", names.person)),
        "by_chat": biggest(await grouped("session", lambda key: names.session(key).title)),
        "by_agent": biggest(await grouped("agent", lambda key: key)),
        "by_model": biggest(await grouped("model", lambda key: key)),
        # the money caps ([limits] *_usd, a person's or an agent's own): how far each is spent
        "caps": [
            {"key": c.key, "spent": c.spent_usd, "limit": c.limit_usd, "resets_at": c.resets_at}
            for c in await gateway.spending()
        ],
    }
