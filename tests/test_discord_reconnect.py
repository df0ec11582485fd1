"""The Discord reconnect policy and rendering, without a network: a fake clock drives them."""

from __future__ import annotations

from channels.discord.connection import ReconnectPolicy
from channels.discord.render import MAX_MESSAGE, nonce, render
from gateway.core.messages import Attachment


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_no_more_than_the_budget_of_failures_in_ten_minutes() -> None:
    clock = Clock()
    policy = ReconnectPolicy(base=1.0, cap=60.0, max_failures=30, window=600.0, clock=clock)
    attempts = 0
    while clock.now < 1_000.0 + 24 * 3600:  # a server that refuses every attempt for a day
        clock.now += policy.delay()
        attempts += 1
        policy.ended(ok=False, resumed=True, lasted=0.0)
    windows = 24 * 6
    assert attempts <= 30 * (windows + 1)
    # and never 30 within any 10-minute span
    times = list(policy.failures)
    assert all(b - a >= 600.0 for a, b in zip(times, times[30:], strict=False))


def test_backoff_is_capped_and_resets_after_a_stable_connection() -> None:
    clock = Clock()
    policy = ReconnectPolicy(base=1.0, cap=8.0, max_failures=1_000, clock=clock)
    assert policy.delay() == 0.0  # the first connection is immediate
    delays = []
    for _ in range(10):
        policy.ended(ok=False, resumed=False, lasted=0.0)
        delays.append(policy.delay())
    assert all(0.5 <= d <= 8.0 for d in delays)  # jittered, never above the cap
    policy.ended(ok=True, resumed=True, lasted=3_600.0)
    assert policy.delay() == 0.0  # Discord's "reconnect" after a long session: at once


def test_a_flapping_connection_backs_off_even_though_it_connects() -> None:
    policy = ReconnectPolicy(base=1.0, cap=8.0, stable_after=30.0, clock=Clock())
    delays = []
    for _ in range(5):
        delays.append(policy.delay())
        policy.ended(ok=True, resumed=True, lasted=0.1)  # RESUMED, then dropped at once
    delays.append(policy.delay())
    assert delays[0] == 0.0 and all(d >= 0.5 for d in delays[1:])
    assert len(policy.failures) == 0  # not invalid requests: they did connect


def test_failed_resumes_lead_to_identify() -> None:
    policy = ReconnectPolicy(max_failed_resumes=3, clock=Clock())
    decisions = []
    for _ in range(4):
        decisions.append(policy.should_resume(has_session=True))
        policy.ended(ok=False, resumed=True, lasted=0.0)
    assert decisions == [True, True, True, False]
    policy.ended(ok=True, resumed=False, lasted=0.0)
    assert policy.should_resume(has_session=True)


def test_render_splits_at_2000_and_puts_files_on_the_last_part() -> None:
    files = tuple(Attachment(kind="document", path=f"/tmp/f{i}") for i in range(12))
    parts = render("word " * 1_000, files)
    assert [len(p.content or "") <= MAX_MESSAGE for p in parts] == [True] * len(parts)
    assert len(parts[-2].files) == 10 and parts[-2].content  # 10 files ride on the last text
    assert parts[-1].content is None and len(parts[-1].files) == 2
    assert render("") == []


def test_nonces_are_stable_short_and_distinct() -> None:
    assert nonce("key", 0) == nonce("key", 0)
    assert nonce("key", 0) != nonce("key", 1) != nonce("other", 1)
    assert len(nonce("key", 0)) <= 25
