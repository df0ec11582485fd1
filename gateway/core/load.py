"""What this node is doing, as `switchboard status` and a cluster's node rows show it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class NodeLoad:
    """Kept up to date by the dispatcher; read by the cluster membership's heartbeat."""

    sessions: set[str] = field(default_factory=set)  # sessions with work here
    running: int = 0  # turns running now
    turns_run: int = 0
