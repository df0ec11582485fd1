"""What ``/api/status`` reports (``switchboard status`` reads it; the control center's
Health page shows the same parts), gathered from the running gateway as plain JSON data.

Everything here is read-only. The page renders it with ``textContent`` only, so nothing
from a chat, a trace or a workspace file can become markup.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.core.addressing import INTERNAL_CHANNELS
from gateway.core.channel import SupportsHealth
from gateway.core.schedule_spec import zone
from gateway.core.system.logs import last_problem
from gateway.core.workspace_files import listing
from gateway.web.traces import TurnSummary, recent_turns, usage_from_traces

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

LOCAL = frozenset({"terminal"})  # channels/terminal: always up while the gateway runs
USAGE_DAYS = 30


@dataclass(frozen=True, slots=True)
class Totals:
    key: str
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    estimated_tokens: int = 0  # of input + output: counted by us, the server reported none
    cost: float | None = None  # US dollars at the prices when the calls were made


async def snapshot(gateway: GatewayView) -> dict[str, Any]:
    settings = gateway.settings
    trace_dir = settings.data_dir / "traces"
    counts = await gateway.store.journal.counts()
    turns = await asyncio.to_thread(recent_turns, trace_dir, 25)
    work = gateway.work_in_progress()
    return {
        "version": __version__,
        "agent": settings.agent.name,
        "model": f"{settings.llm.model} ({settings.llm.provider})",
        "now": time.time(),
        "channels": channel_states(gateway),
        "models": model_states(gateway),
        # the nodes of a cluster (none with the SQLite file): leader first
        "nodes": [node.to_dict(time.time()) for node in await gateway.store.nodes.listing()],
        "last_error": last_error(),
        "work": {
            "running": work.running_turns,
            "queued": work.queued_messages,
            "waiting": counts.get("pending", 0),
            "unsent": await gateway.store.outbox.pending_count(),
        },
        "recent_turns": [t.to_dict() for t in turns],
        "usage": await usage(gateway, trace_dir),
        "schedule": schedule(gateway),
        "pairing": await pending_pairings(gateway),
        "workspace": [asdict(f) for f in await asyncio.to_thread(listing, settings.workspace_dir)],
    }


async def readiness(gateway: GatewayView, web: Sequence[object]) -> dict[str, Any]:
    """``/readyz``: the store answers and at least one channel is connected.

    The web chat, the terminal (``switchboard chat`` attaches to it), webhooks and the API
    (``web``: every channel served by this web server) are up as soon as the gateway is, so
    they count only when there is no other channel; the internal agent and task channels
    never count. Channels that do not report their health count as connected.
    """
    try:
        async with asyncio.timeout(5):
            await gateway.store.journal.counts()
        store = True
    except Exception:
        store = False
    states = {
        name: channel.health().connected if isinstance(channel, SupportsHealth) else True
        for name, channel in gateway.channels.items()
        if name not in INTERNAL_CHANNELS
    }
    others = {n: c for n, c in states.items() if gateway.channels[n] not in web and n not in LOCAL}
    counted = others or states
    ready = store and any(counted.values())
    return {"ready": ready, "store": store, "channels": states}


def last_error() -> dict[str, Any] | None:
    problem = last_problem()
    if problem is None:
        return None
    return {"at": problem.at, "level": problem.level, "message": problem.message[:500]}


def model_states(gateway: GatewayView) -> list[dict[str, Any]]:
    """Every configured model: where it is set, whether it answered last, its cooldown."""
    return [
        {
            "name": m.name,
            "label": m.label,
            "settings": list(m.settings),
            "answered_last": m.answered_last,
            "last_answer_at": m.last_answer_at,
            "cooling_until": m.cooling_until,
            "last_error": m.last_error,
        }
        for m in gateway.model_states()
    ]


def channel_states(gateway: GatewayView) -> list[dict[str, Any]]:
    states = []
    for name, channel in gateway.channels.items():
        if isinstance(channel, SupportsHealth):
            health = channel.health()
            states.append(
                {
                    "name": name,
                    "connected": health.connected,
                    "last_error": health.last_error,
                    "last_message_at": health.last_message_at,
                    "detail": health.detail,
                }
            )
        else:
            states.append(
                {
                    "name": name,
                    "connected": None,
                    "last_error": None,
                    "last_message_at": None,
                    "detail": "this channel does not report its health",
                }
            )
    return states


async def usage(gateway: GatewayView, trace_dir: Path) -> dict[str, Any]:
    """Tokens and cost per day, chat, agent and person over the last 30 days, and how much
    of each money cap is spent."""
    seconds = USAGE_DAYS * 86_400
    report = gateway.store.usage
    by_day = [Totals(*_fields(u)) for u in await report.since(seconds, by="day")]
    by_chat = [Totals(*_fields(u)) for u in await report.since(seconds, by="session")]
    by_agent = [Totals(*_fields(u)) for u in await report.since(seconds, by="agent")]
    by_person = [Totals(*_fields(u)) for u in await report.since(seconds, by="person")]
    source = "usage table"
    if not by_day:  # turns not recorded in the usage table yet: add up the traces
        turns = await asyncio.to_thread(usage_from_traces, trace_dir, USAGE_DAYS)
        owners = zone(gateway.settings.timezone)  # the owner's days, as the usage table's
        by_day = _group(
            turns, lambda t: f"{datetime.fromtimestamp(t.finished_at, owners):%Y-%m-%d}"
        )
        by_chat = _group(turns, lambda t: t.session_key)
        source = "traces"

    def rows(totals: list[Totals]) -> list[dict[str, Any]]:
        return [
            {
                "key": t.key,
                "turns": t.turns,
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "cache_read_tokens": t.cache_read_tokens,
                "estimated_tokens": t.estimated_tokens,
                "cost": t.cost,
            }
            for t in totals
        ]

    def by_spend(totals: list[Totals]) -> list[Totals]:
        return sorted(totals, key=lambda t: (-(t.cost or 0), -(t.input_tokens + t.output_tokens)))

    return {
        "source": source,
        "priced": any(t.cost is not None for t in by_day),
        "by_day": rows(sorted(by_day, key=lambda t: t.key, reverse=True)),
        "by_chat": rows(by_spend(by_chat)),
        "by_agent": rows(by_spend(by_agent)),
        "by_person": rows(by_spend(by_person)),
        "caps": [
            {
                "key": c.key,
                "spent": c.spent_usd,
                "limit": c.limit_usd,
                "resets_at": c.resets_at,
            }
            for c in await gateway.spending()
        ],
    }


def _fields(u: Any) -> tuple[str, int, int, int, int, int, float | None]:
    return (
        u.key,
        u.turns,
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.estimated_tokens,
        u.cost_usd,
    )


def _group(turns: list[TurnSummary], key: Any) -> list[Totals]:
    groups: dict[str, list[TurnSummary]] = {}
    for turn in turns:
        if turn.input_tokens or turn.output_tokens:
            groups.setdefault(str(key(turn)), []).append(turn)
    return [
        Totals(
            name,
            len(items),
            sum(t.input_tokens for t in items),
            sum(t.output_tokens for t in items),
            0,
            sum(t.input_tokens + t.output_tokens for t in items if t.estimated),
        )
        for name, items in groups.items()
    ]


def schedule(gateway: GatewayView) -> dict[str, Any]:
    """Heartbeat and scheduled jobs, soonest first."""
    snapshot_items = gateway.schedule()
    if snapshot_items is None:
        return {"available": False, "items": []}
    items = [
        {
            "id": item.id,
            "kind": item.kind,
            "description": item.description,
            "next_run": item.next_run.timestamp() if item.next_run is not None else None,
            "target": item.target,
        }
        for item in snapshot_items
    ]
    items.sort(key=lambda i: (i["next_run"] is None, i["next_run"] or 0))
    return {"available": True, "items": items}


async def pending_pairings(gateway: GatewayView) -> list[dict[str, Any]]:
    return [
        {
            "code": r.code,
            "channel": r.channel,
            "sender_id": r.sender_id,
            "sender_name": r.sender_name,
            "expires_at": r.expires_at,
        }
        for r in await gateway.store.pairings.listing()
        if r.state == "pending"
    ]
