"""Deduplication guard: an identical call already made in this turn is not run again."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def call_key(name: str, args: dict[str, Any]) -> str:
    """Tool name plus arguments normalised (key order and whitespace do not matter)."""
    return name + ":" + json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class DedupGuard:
    _seen: dict[str, int] = field(default_factory=dict)  # key -> step that made the call

    def earlier_step(self, name: str, args: dict[str, Any]) -> int | None:
        return self._seen.get(call_key(name, args))

    def record(self, name: str, args: dict[str, Any], step: int) -> None:
        self._seen.setdefault(call_key(name, args), step)

    @staticmethod
    def message(name: str, step: int) -> str:
        return (
            f"Not run again: this exact {name} call was already made at step {step} of this turn "
            "and its result is above. Use that result, or change the arguments if you need "
            "something different."
        )
