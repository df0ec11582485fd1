"""Prometheus metrics at ``/metrics``, fed from what the gateway already records.

No core module counts anything for us: latencies, tokens, guard decisions and errors come
from the per-turn traces (each new trace line is read once, following the files the way
``tail -f`` does); queue depths and channel state are read from the dispatcher, journal,
outbox and channels at scrape time. Counters start at zero when the process starts, as
Prometheus expects; turns finished before the start are not counted again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from gateway.core.channel import SupportsCounts, SupportsHealth
from gateway.web.traces import FAILURE_CODES, Event, day_dirs, parse_lines, segments

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

CONTENT_TYPE = CONTENT_TYPE_LATEST
TURN_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
# Guard codes that mean the turn ended in a failure, by error kind.
ERROR_KINDS = {"TURN_TIMEOUT": "timeout", "TOKEN_LIMIT": "limit", "STEP_LIMIT": "limit"}


@dataclass(slots=True)
class TraceFollower:
    """Reads only what was appended to trace files since the last poll."""

    directory: Path
    offsets: dict[Path, int] = field(default_factory=dict)
    first_day: str = field(default_factory=lambda: time.strftime("%Y-%m-%d"))

    def prime(self) -> None:
        """Skip what exists now: it was counted (or not) by an earlier process."""
        for path in self._files():
            try:
                self.offsets[path] = path.stat().st_size
            except OSError:
                continue

    def poll(self) -> list[list[Event]]:
        """New events, grouped into turn attempts."""
        found: list[list[Event]] = []
        for path in self._files():
            offset = self.offsets.get(path, 0)
            try:
                with path.open("rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits
            if not complete:
                continue
            self.offsets[path] = offset + len(complete)
            found.extend(segments(parse_lines(complete.decode("utf-8", errors="replace"))))
        return found

    def _files(self) -> list[Path]:
        """Trace files of yesterday and today (a turn's file is named by its start day),
        never from before this process started."""
        since = max(self.first_day, time.strftime("%Y-%m-%d", time.localtime(time.time() - 86_400)))
        days = [d for d in day_dirs(self.directory) if d.name >= since]
        files = [p for day in sorted(days) for p in day.glob("*.jsonl")]
        current = set(files)
        for gone in [p for p in self.offsets if p not in current]:
            del self.offsets[gone]  # older than the window: stop tracking it
        return files


class GatewayMetrics:
    def __init__(self, gateway: GatewayView) -> None:
        self._gateway = gateway
        self._follower = TraceFollower(gateway.settings.data_dir / "traces")
        self._lock = asyncio.Lock()
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turn_seconds = Histogram(
            "switchboard_turn_duration_seconds",
            "Wall time of agent turns (one attempt each)",
            ["kind"],
            buckets=TURN_BUCKETS,
            registry=r,
        )
        self.llm_seconds = Histogram(
            "switchboard_llm_call_duration_seconds",
            "Time of one model call, from request to the last streamed token",
            buckets=LLM_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "switchboard_llm_tokens", "Tokens the provider reported", ["kind"], registry=r
        )
        self.turns = Counter(
            "switchboard_turns", "Agent turns finished", ["kind", "outcome"], registry=r
        )
        self.errors = Counter(
            "switchboard_errors",
            "Errors by kind: llm, internal, tool, timeout, limit",
            ["kind"],
            registry=r,
        )
        self.guards = Counter(
            "switchboard_guard_decisions",
            "Decisions of the turn guards (parser, dedupe, loops, review, limits, ...)",
            ["guard", "code"],
            registry=r,
        )
        self.running = Gauge("switchboard_turns_running", "Turns running now", registry=r)
        self.queue = Gauge(
            "switchboard_queue_depth",
            "Work waiting: dispatcher (messages behind a running turn of their chat), "
            "journal (accepted, not yet in a turn), outbox (replies not yet delivered)",
            ["queue"],
            registry=r,
        )
        self.channel_up = Gauge(
            "switchboard_channel_connected",
            "1 when the channel reports itself connected",
            ["channel"],
            registry=r,
        )
        self.model_cooling = Gauge(
            "switchboard_model_cooling_until_seconds",
            "Unix time a model's cooldown ends after a failure (llm.fallbacks); 0: not cooling",
            ["model"],
            registry=r,
        )
        self.model_last = Gauge(
            "switchboard_model_answered_last",
            "1 for the model the latest answer came from, 0 for the others",
            ["model"],
            registry=r,
        )
        self.program_requests = Counter(
            "switchboard_program_requests",
            "Requests of other programs: webhook deliveries by hook, API requests by "
            "endpoint, by outcome (accepted, duplicate, bad_signature, ok, unauthorized, ...)",
            ["channel", "what", "outcome"],
            registry=r,
        )
        self._program_seen: dict[tuple[str, str, str], int] = {}
        self.tasks = Gauge(
            "switchboard_background_tasks",
            "Background tasks not finished, by state (queued, running, awaiting_approval)",
            ["state"],
            registry=r,
        )
        self.skills_routed = Counter(
            "switchboard_skills_routed",
            "Skills loaded into a turn because a message matched their when: triggers",
            ["skill"],
            registry=r,
        )
        # a cluster's nodes, as the store records them (what the leader serving this sees)
        self.node_leading = Gauge(
            "switchboard_node_leading",
            "1 for the node that leads the cluster",
            ["node"],
            registry=r,
        )
        self.node_sessions = Gauge(
            "switchboard_node_sessions", "Sessions a node holds now", ["node"], registry=r
        )
        self.node_turns = Gauge(
            "switchboard_node_turns", "Turns a node ran since it started", ["node"], registry=r
        )
        self.node_connections = Gauge(
            "switchboard_node_connections",
            "A node's open connections to the database",
            ["node"],
            registry=r,
        )
        self.node_heartbeat_age = Gauge(
            "switchboard_node_heartbeat_age_seconds",
            "Seconds since a node's last heartbeat",
            ["node"],
            registry=r,
        )
        for state in ("queued", "running", "awaiting_approval"):
            self.tasks.labels(state)
        for kind in ("input", "output", "cache_read"):
            self.tokens.labels(kind)
        for kind in ("llm", "internal", "tool", "timeout", "limit"):
            self.errors.labels(kind)

    async def start(self) -> None:
        await asyncio.to_thread(self._follower.prime)

    async def refresh(self) -> None:
        """Fold in new trace lines and read the live gauges (called per scrape and view)."""
        async with self._lock:
            for attempt in await asyncio.to_thread(self._follower.poll):
                self._observe(attempt)
            gateway = self._gateway
            work = gateway.work_in_progress()
            self.running.set(work.running_turns)
            self.queue.labels("dispatcher").set(work.queued_messages)
            counts = await gateway.store.journal.counts()
            self.queue.labels("journal").set(counts.get("pending", 0))
            self.queue.labels("outbox").set(await gateway.store.outbox.pending_count())
            for name, channel in gateway.channels.items():
                if isinstance(channel, SupportsHealth):
                    self.channel_up.labels(name).set(1 if channel.health().connected else 0)
            for model in gateway.model_states():
                self.model_cooling.labels(model.label).set(model.cooling_until or 0)
                self.model_last.labels(model.label).set(1 if model.answered_last else 0)
            tasks = await gateway.store.tasks.counts()
            for state in ("queued", "running", "awaiting_approval"):
                self.tasks.labels(state).set(tasks.get(state, 0))
            self._count_programs()
            await self._count_nodes()

    async def _count_nodes(self) -> None:
        nodes = await self._gateway.store.nodes.listing()
        now = time.time()
        gauges = (
            self.node_leading,
            self.node_sessions,
            self.node_turns,
            self.node_connections,
            self.node_heartbeat_age,
        )
        for gauge in gauges:
            gauge.clear()  # a forgotten node's series go
        for node in nodes:
            self.node_leading.labels(node.name).set(1 if node.role == "leader" else 0)
            self.node_sessions.labels(node.name).set(node.sessions_in_flight)
            self.node_turns.labels(node.name).set(node.turns)
            self.node_connections.labels(node.name).set(node.connections)
            self.node_heartbeat_age.labels(node.name).set(max(0.0, now - node.heartbeat_at))

    def _count_programs(self) -> None:
        """Fold in the program channels' request counts (they count from zero at start)."""
        for name, channel in self._gateway.channels.items():
            if not isinstance(channel, SupportsCounts):
                continue
            for (what, outcome), total in channel.counts().items():
                key = (name, what, outcome)
                new = total - self._program_seen.get(key, 0)
                if new > 0:
                    self.program_requests.labels(*key).inc(new)
                    self._program_seen[key] = total

    async def render(self) -> bytes:
        await self.refresh()
        return generate_latest(self.registry)

    def _observe(self, attempt: list[Event]) -> None:
        start = next((e for e in attempt if e.get("event") == "turn"), None)
        kind = str(start.get("kind", "chat")) if start else "chat"
        failed = False
        for event in attempt:
            name = event.get("event")
            if name == "llm":
                self.llm_seconds.observe(float(event.get("ms", 0) or 0) / 1000)
                self.tokens.labels("input").inc(int(event.get("input_tokens", 0) or 0))
                self.tokens.labels("output").inc(int(event.get("output_tokens", 0) or 0))
                self.tokens.labels("cache_read").inc(int(event.get("cache_read", 0) or 0))
            elif name == "tool" and event.get("error"):
                self.errors.labels("tool").inc()
            elif name == "skill":
                self.skills_routed.labels(str(event.get("skill", ""))).inc()
            elif name == "llm_error":
                self.errors.labels("llm").inc()
                failed = True
            elif name == "internal_error":
                self.errors.labels("internal").inc()
                failed = True
            elif name == "guard":
                code = str(event.get("code", ""))
                self.guards.labels(str(event.get("guard", "")), code).inc()
                if code in FAILURE_CODES:
                    self.errors.labels(ERROR_KINDS.get(code, "limit")).inc()
                    failed = True
        if start is not None:
            seconds = max((float(e.get("t", 0) or 0) for e in attempt), default=0.0)
            self.turn_seconds.labels(kind).observe(seconds)
            self.turns.labels(kind, "failed" if failed else "done").inc()
