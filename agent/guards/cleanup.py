"""Error cleanup: once a retried action succeeds, the failed attempt leaves stored history.

The model still sees its failures while the turn runs (it needs them to recover); future
turns see only what worked, so the mistake is not repeated and the context stays lean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Checkpoint(Protocol):
    """A stored step of the running turn (gateway.store.StoredMessage)."""

    @property
    def id(self) -> int: ...

    @property
    def body(self) -> dict[str, Any]: ...


def failed_attempts(checkpoints: Sequence[Checkpoint]) -> list[int]:
    """Ids of assistant tool-call messages (and their results) whose every call failed and
    whose tools later succeeded in the same turn."""
    results: dict[str, tuple[int, bool, str]] = {}  # call id -> (checkpoint id, is_error, tool)
    for step in checkpoints:
        body = step.body
        if body["role"] == "tool" and body.get("tool_call_id"):
            results[body["tool_call_id"]] = (
                step.id,
                bool(body.get("is_error")),
                body.get("name", ""),
            )
    position = {d.id: i for i, d in enumerate(checkpoints)}
    succeeded_at: dict[str, list[int]] = {}
    for step_id, is_error, tool in results.values():
        if not is_error:
            succeeded_at.setdefault(tool, []).append(position[step_id])
    drop: list[int] = []
    for step in checkpoints:
        calls = step.body.get("tool_calls") or []
        if step.body["role"] != "assistant" or not calls or step.body.get("content"):
            continue
        outcomes = [results.get(c["id"]) for c in calls]
        if any(o is None or not o[1] for o in outcomes):
            continue  # unanswered or partly successful: keep
        here = position[step.id]
        if all(any(p > here for p in succeeded_at.get(o[2], [])) for o in outcomes if o):
            drop.append(step.id)
            drop.extend(o[0] for o in outcomes if o)
    return drop
