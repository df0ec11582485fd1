"""Deduplication guard: a repeated call is skipped only while its result cannot have changed.

An identical call (same tool, same arguments) made earlier in the turn is not run again as
long as nothing that could change its result happened in between: no call that changes
state (a write, a send, a new job; see :meth:`agent.tools.base.Tool.changes_state`) ran
since. After one, the repeat runs, so the model reads the new state instead of an old
answer. Time-sensitive and repeatable tools are never skipped (the turn loop decides).
An identical state-changing call right after itself is still skipped: doing the same thing
twice in a row is the mistake this guard exists for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def call_key(name: str, args: dict[str, Any]) -> str:
    """Tool name plus arguments normalised (key order and whitespace do not matter)."""
    return name + ":" + json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class DedupGuard:
    # key -> (step of the latest identical call, the state version its result saw)
    _seen: dict[str, tuple[int, int]] = field(default_factory=dict)
    _version: int = 0  # how many state-changing calls the turn has run

    def earlier_step(self, name: str, args: dict[str, Any]) -> int | None:
        """The step of an identical call whose result still holds, or ``None``."""
        seen = self._seen.get(call_key(name, args))
        return seen[0] if seen is not None and seen[1] == self._version else None

    def record(self, name: str, args: dict[str, Any], step: int, *, changes_state: bool) -> None:
        """A call about to run; ``changes_state`` makes every earlier result stale."""
        if changes_state:
            self._version += 1
        self._seen[call_key(name, args)] = (step, self._version)

    @staticmethod
    def message(name: str, step: int) -> str:
        return (
            f"Not run again: this exact {name} call was already made at step {step} of this turn, "
            "nothing has changed since, and its result is above. Use that result, or change "
            "the arguments if you need something different."
        )
