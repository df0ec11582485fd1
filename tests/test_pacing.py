"""Outbound pacing (channels/telegram/pacing.py): bursts leave at once, sustained rates are paced,
a wait beyond ``max_wait`` goes back to the outbox instead of being slept. Time is virtual:
the pacer's clock and sleep are the test's, so nothing here depends on the machine's speed."""

from __future__ import annotations

import asyncio

import pytest

from channels.buckets import Rate
from channels.telegram.pacing import Pacer
from gateway.core.errors import ChannelRateLimited


class VirtualTime:
    """A clock that moves only when something sleeps on it (or the test advances it)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


ONE_A_SECOND = Rate(1.0, burst=3)


def pacer(time: VirtualTime, overall: Rate | None = None) -> Pacer:
    return Pacer(overall, clock=time.clock, sleep=time.sleep)


async def test_a_burst_leaves_at_once_and_only_the_sustained_excess_waits() -> None:
    time = VirtualTime()
    pace = pacer(time)
    for _ in range(3):  # the burst allowance: no waiting at all
        await pace.acquire([("chat", "42", ONE_A_SECOND)], max_wait=5)
    assert time.slept == []
    await pace.acquire([("chat", "42", ONE_A_SECOND)], max_wait=5)
    assert time.slept == [1.0]  # the fourth in the same instant waits for one refill
    time.now += 10  # an idle chat refills up to its burst, not beyond
    for _ in range(3):
        await pace.acquire([("chat", "42", ONE_A_SECOND)], max_wait=5)
    assert time.slept == [1.0]


async def test_chats_have_their_own_buckets_and_share_the_overall_one() -> None:
    time = VirtualTime()
    pace = pacer(time, overall=Rate(10.0, burst=4))
    for chat in ("1", "2", "3", "4"):
        await pace.acquire([("chat", chat, ONE_A_SECOND)], max_wait=5)
    assert time.slept == []  # four chats, each within its own burst and the overall one
    await pace.acquire([("chat", "5", ONE_A_SECOND)], max_wait=5)
    assert time.slept == [0.1]  # the overall bucket paces the fifth at its 10/s


async def test_concurrent_senders_queue_behind_each_other() -> None:
    time = VirtualTime()
    frozen_waits: list[float] = []

    async def no_sleep(seconds: float) -> None:  # time does not move: each reservation counts
        frozen_waits.append(seconds)

    pace = Pacer(None, clock=time.clock, sleep=no_sleep)
    rate = Rate(2.0, burst=1)
    await asyncio.gather(*(pace.acquire([("chat", "9", rate)], max_wait=5) for _ in range(4)))
    assert frozen_waits == [0.5, 1.0, 1.5]


async def test_a_wait_beyond_max_wait_is_not_slept_and_takes_no_slot() -> None:
    time = VirtualTime()
    pace = pacer(time)
    group = Rate.per_minute(20, burst=1)
    await pace.acquire([("group", "-100", group)], max_wait=2)
    with pytest.raises(ChannelRateLimited) as limited:  # the next slot is 3 s away
        await pace.acquire([("group", "-100", group)], max_wait=2)
    assert limited.value.retry_after == pytest.approx(3.0)
    assert time.slept == []
    time.now += 3.0  # the refused attempt reserved nothing: the slot is free exactly now
    await pace.acquire([("group", "-100", group)], max_wait=2)
    assert time.slept == []


def test_a_rate_needs_a_positive_rate_and_a_burst_of_at_least_one() -> None:
    with pytest.raises(ValueError, match="burst"):
        Rate(1.0, burst=0.5)
    with pytest.raises(ValueError, match="per_second"):
        Rate(0.0, burst=1)
