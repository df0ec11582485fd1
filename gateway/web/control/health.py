"""The control center's health: channels, models, the store, the nodes of a cluster and the
last error, each with what to do about a problem, and the latest turns with their traces.

What it reads is what ``/api/status`` reads (gateway/web/status.py); this adds the advice a
person needs when something is wrong, in plain words and commands to run.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.web.control.names import Names
from gateway.web.status import channel_states, last_error, model_states
from gateway.web.traces import recent_turns

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

RECENT_TURNS = 25
DOCTOR = "`switchboard doctor` checks it, and `switchboard logs` says what happened."


def channel_advice(channel: dict[str, Any]) -> str | None:
    if channel["connected"] is False:
        if channel["last_error"]:
            return (
                "Disconnected: the error says why. Check the channel's credentials and the "
                f"network; it reconnects by itself. {DOCTOR}"
            )
        return f"Not connected yet: it is starting, or it stopped. {DOCTOR}"
    if channel["last_error"]:
        return "It works now; the error above is its last problem."
    return None


def model_advice(model: dict[str, Any], now: float) -> str | None:
    cooling = model["cooling_until"] is not None and model["cooling_until"] > now
    if cooling:
        return (
            "Failing, so skipped until the time shown (the next model of llm.fallbacks answers "
            f"meanwhile). Check its base URL, key and that its server runs. {DOCTOR}"
        )
    if model["last_error"]:
        return f"Its last call failed: {DOCTOR}"
    return None


async def report(gateway: GatewayView) -> dict[str, Any]:
    settings = gateway.settings
    now = time.time()
    channels = channel_states(gateway)
    for channel in channels:
        channel["advice"] = channel_advice(channel)
    models = model_states(gateway)
    for model in models:
        model["advice"] = model_advice(model, now)
    store: dict[str, Any] = {
        "engine": "PostgreSQL" if settings.storage.database_url() else "SQLite",
        "ok": True,
        "advice": None,
    }
    try:
        async with asyncio.timeout(5):
            counts = await gateway.store.journal.counts()
            unsent = await gateway.store.outbox.pending_count()
    except Exception as exc:
        store.update(ok=False, error=str(exc)[:300])
        store["advice"] = (
            "The store does not answer: check free disk space (SQLite) or that the database "
            f"server runs (storage.url). {DOCTOR}"
        )
        counts, unsent = {}, 0
    degraded = gateway.degraded()
    if degraded is not None:
        store.update(ok=False, error=degraded, advice="It recovers by itself; nothing to do.")
    nodes = [node.to_dict(now) for node in await gateway.store.nodes.listing()]
    for node in nodes:
        node["advice"] = (
            "Stopped sending heartbeats: its conversations moved to the other nodes."
            if node["role"] == "gone"
            else None
        )
    work = gateway.work_in_progress()
    problem = last_error()
    names = await Names.load(gateway.store)
    turns = await asyncio.to_thread(recent_turns, settings.data_dir / "traces", RECENT_TURNS)
    return {
        "version": __version__,
        "agent": settings.agent.name,
        "model": f"{settings.llm.model} ({settings.llm.provider})",
        "now": now,
        "channels": channels,
        "models": models,
        "store": store,
        "nodes": nodes,
        "work": {
            "running": work.running_turns,
            "queued": work.queued_messages,
            "waiting": counts.get("pending", 0),
            "unsent": unsent,
        },
        "last_error": problem,
        "last_error_advice": None
        if problem is None
        else "`switchboard logs -n 200` shows it with what came before.",
        "recent_turns": [
            {**t.to_dict(), "title": names.session(t.session_key).title} for t in turns
        ],
    }
