"""Capped exponential backoff with full jitter, for reconnects and retries."""

from __future__ import annotations

import random
from dataclasses import dataclass


def backoff_delay(attempt: int, *, base: float = 1.0, cap: float = 300.0) -> float:
    """The delay before retry number ``attempt`` (from 0): jittered, never above ``cap``."""
    ceiling = min(cap, base * 2 ** min(attempt, 32))
    return random.uniform(min(base, ceiling) / 2, ceiling)  # noqa: S311 - jitter, not crypto


@dataclass(slots=True)
class Backoff:
    """Stateful helper for a reconnect loop: ``next()`` after a failure, ``reset()`` on success."""

    base: float = 1.0
    cap: float = 60.0
    attempts: int = 0

    def next(self) -> float:
        delay = backoff_delay(self.attempts, base=self.base, cap=self.cap)
        self.attempts += 1
        return delay

    def reset(self) -> None:
        self.attempts = 0
