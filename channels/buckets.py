"""Token buckets: a burst goes at once, only a sustained rate above the limit waits.

Telegram's outbound pacing (channels/telegram/pacing.py) and the webhooks' per-hook rate
limit (channels/hooks) count with them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rate:
    """A sustained rate and the burst allowed on top of it."""

    per_second: float
    burst: float  # messages that may leave at once when the bucket is full (at least 1)

    def __post_init__(self) -> None:
        if self.per_second <= 0 or self.burst < 1:
            raise ValueError("a rate needs per_second > 0 and burst >= 1")

    @classmethod
    def per_minute(cls, messages: float, *, burst: float) -> Rate:
        return cls(messages / 60.0, burst)


class TokenBucket:
    """Holds up to ``rate.burst`` tokens, refilled at ``rate.per_second``.

    :meth:`take` may leave the level below zero: that debt is the reservation of a caller
    who waits for it, so concurrent callers queue behind each other instead of all waking
    at the same instant.
    """

    __slots__ = ("_level", "_updated", "rate")

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate = rate
        self._level = rate.burst
        self._updated = now

    def delay(self, now: float) -> float:
        """Seconds until a token is available (0.0 when one is now)."""
        self._refill(now)
        if self._level >= 1.0:
            return 0.0
        return (1.0 - self._level) / self.rate.per_second

    def take(self, now: float) -> None:
        self._refill(now)
        self._level -= 1.0

    def _refill(self, now: float) -> None:
        elapsed = now - self._updated
        if elapsed > 0:
            self._level = min(self.rate.burst, self._level + elapsed * self.rate.per_second)
            self._updated = now
