"""Cron schedules fire on the days standard cron would: checked by hand for the cases that
went wrong, and as a property against cronsim and an independent matcher of the fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.schedule_spec import ScheduleError, ScheduleSpec, parse_schedule

MONDAY = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)  # a Monday


def fires(expr: str, *, after: datetime = MONDAY, count: int = 3, tz: str = "UTC") -> list[str]:
    spec = parse_schedule(expr, now=after, timezone=tz)
    out: list[str] = []
    previous = None
    for _ in range(count):
        fire = spec.next_after(previous, after if previous is None else previous)
        assert fire is not None
        out.append(f"{fire:%a %Y-%m-%d %H:%M}")
        previous = fire
    return out


def test_weekday_numbers_ranges_and_steps_mean_what_cron_means() -> None:
    # 0 is Sunday, so 0-5 is Sunday through Friday (it used to be refused).
    assert fires("0 9 * * 0-5") == [
        "Tue 2026-11-24 09:00",
        "Wed 2026-11-25 09:00",
        "Thu 2026-11-26 09:00",
    ]
    # */2 in the weekday field: Sunday, Tuesday, Thursday, Saturday (it fired on Wednesday).
    assert fires("0 9 * * */2") == [
        "Tue 2026-11-24 09:00",
        "Thu 2026-11-26 09:00",
        "Sat 2026-11-28 09:00",
    ]
    assert fires("0 9 * * 7", count=1) == fires("0 9 * * 0", count=1) == ["Sun 2026-11-29 09:00"]
    assert fires("0 9 * * sun", count=1) == ["Sun 2026-11-29 09:00"]


def test_day_of_month_and_weekday_together_mean_either() -> None:
    # "the 1st, or any Monday" (it meant "a Monday that is the 1st": next in 2027-02).
    assert fires("0 9 1 * mon") == [
        "Mon 2026-11-30 09:00",
        "Tue 2026-12-01 09:00",
        "Mon 2026-12-07 09:00",
    ]
    # With one of the two left as *, only the other one counts.
    assert fires("0 9 1 * *", count=2) == ["Tue 2026-12-01 09:00", "Fri 2027-01-01 09:00"]


def test_time_zones_and_daylight_saving() -> None:
    berlin = parse_schedule(
        "30 2 * * *", now=datetime(2026, 3, 28, 12, tzinfo=UTC), timezone="Europe/Berlin"
    )
    jump = berlin.next_after(None, datetime(2026, 3, 28, 12, tzinfo=UTC))
    assert jump is not None and jump.isoformat() == "2026-03-29T03:00:00+02:00"  # 02:30 skipped
    autumn = datetime(2026, 10, 24, 12, tzinfo=UTC)
    first = berlin.next_after(None, autumn)
    assert first is not None
    second = berlin.next_after(first, first)
    assert second is not None and second - first > timedelta(hours=23)  # 02:30 once, not twice


# The night the clocks go back, in zones on either side of the world: (zone, from, to) in UTC.
REPEATED_HOURS = (
    (
        "Europe/Berlin",
        datetime(2027, 10, 30, 23, tzinfo=UTC),
        datetime(2027, 10, 31, 3, tzinfo=UTC),
    ),
    (
        "Europe/London",
        datetime(2027, 10, 30, 23, tzinfo=UTC),
        datetime(2027, 10, 31, 3, tzinfo=UTC),
    ),
    (
        "America/New_York",
        datetime(2027, 11, 7, 4, tzinfo=UTC),
        datetime(2027, 11, 7, 8, tzinfo=UTC),
    ),
    (
        "Australia/Sydney",
        datetime(2027, 4, 3, 14, tzinfo=UTC),
        datetime(2027, 4, 3, 18, tzinfo=UTC),
    ),
)


@pytest.mark.parametrize(("tz", "night", "morning"), REPEATED_HOURS)
@pytest.mark.parametrize("expr", ["30 2 * * *", "30 1 * * *", "45 2 * * 0", "15 1-3 * * *"])
def test_a_time_the_clocks_repeat_comes_once_and_never_before_now(
    tz: str, night: datetime, morning: datetime, expr: str
) -> None:
    """Asked at any minute of that night, the next run is after the time asked at (it was
    the first pass of a repeated time, in the past: a job fired on every round); and
    run after run, each wall time comes once."""
    spec = parse_schedule(expr, now=night, timezone=tz)
    after = night
    while after < morning:
        fire = spec.next_after(None, after)
        assert fire is not None and fire > after, (expr, tz, after)
        after += timedelta(minutes=1)
    walls = [f"{fire:%m-%d %H:%M}" for fire in _chain(spec, night - timedelta(days=1), 6)]
    assert len(set(walls)) == len(walls), walls


def test_a_one_off_at_a_time_the_clocks_skip_or_repeat() -> None:
    """Skipped: right after the jump, as cron; repeated: the next time the clock shows it."""
    spring = datetime(2027, 3, 27, 12, tzinfo=UTC)  # Berlin jumps 02:00 -> 03:00 that night
    for text in ("tomorrow at 2:30", "at 2:30", "2027-03-28 02:30"):
        at = parse_schedule(text, now=spring, timezone="Europe/Berlin").at
        assert at is not None and at.isoformat() == "2027-03-28T03:00:00+02:00", text
    second_pass = datetime(2027, 10, 31, 1, 10, tzinfo=UTC)  # 02:10 CET, after 02:30 CEST
    for text in ("at 2:30", "today at 2:30"):
        at = parse_schedule(text, now=second_pass, timezone="Europe/Berlin").at
        assert at is not None and at.isoformat() == "2027-10-31T02:30:00+01:00", text


def _chain(spec: ScheduleSpec, start: datetime, count: int) -> list[datetime]:
    """The runs one after another, as the scheduler makes them (each asked from the last)."""
    out: list[datetime] = []
    previous = spec.next_after(None, start)
    while previous is not None and len(out) < count:
        out.append(previous)
        previous = spec.next_after(previous, previous)
    return out


def test_bad_expressions_get_a_clear_error() -> None:
    for expr, reason in (
        ("0 9 * * 8", "day-of-week"),
        ("61 * * * *", "minute"),
        ("0 0 31 2 *", ""),
    ):
        with pytest.raises(ScheduleError, match=f"cron expression.*{reason}"):
            parse_schedule(expr, now=MONDAY, timezone="UTC")


def test_the_description_says_it_in_words() -> None:
    spec = parse_schedule("every weekday at 8:00", now=MONDAY, timezone="Europe/Berlin")
    assert (
        spec.describe()
        == "cron '0 8 * * mon-fri': At 08:00 on Monday through Friday (Europe/Berlin)"
    )
    repeats = ("every 2 hours", "every 90 minutes", "every 1 minute", "every 1 day", "every 36h")
    described = [parse_schedule(r, now=MONDAY, timezone="UTC").describe() for r in repeats]
    assert described == [
        "every 2 hours",
        "every 90 minutes",
        "every minute",
        "every day",
        "every 36 hours",
    ]


# -- property: our schedule agrees with the library and with the rules ---------------------

NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@st.composite
def field(draw: st.DrawFn, low: int, high: int, *, weekday: bool = False) -> str:
    top = 7 if weekday else high
    kind = draw(
        st.sampled_from(
            ["*", "n", "range", "step", "list", "name"]
            if weekday
            else ["*", "n", "range", "step", "list"]
        )
    )
    if kind == "*":
        return "*"
    if kind == "n":
        return str(draw(st.integers(low, top)))
    if kind == "name":
        return draw(st.sampled_from(NAMES))
    if kind == "range":
        a = draw(st.integers(low, high))
        b = draw(st.integers(a, top))
        return f"{a}-{b}"
    if kind == "step":
        start = draw(st.sampled_from(["*", str(draw(st.integers(low, high)))]))
        return f"{start}/{draw(st.integers(1, max(1, high - low)))}"
    values = draw(st.lists(st.integers(low, top), min_size=2, max_size=4, unique=True))
    return ",".join(map(str, values))


def expand(text: str, low: int, high: int, *, weekday: bool = False) -> set[int]:
    """The values a field allows, written from the crontab(5) manual page."""
    out: set[int] = set()
    for written in text.split(","):
        part = str(NAMES.index(written)) if written in NAMES else written
        base, _, step = part.partition("/")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            first, last = map(int, base.split("-"))
        else:
            first = int(base)
            last = high if step else first
        out.update(range(first, last + 1, int(step or 1)))
    return {0 if weekday and v == 7 else v for v in out}


def matches(expr: str, moment: datetime) -> bool:
    minute, hour, dom, month, dow = expr.split()
    day_ok = moment.day in expand(dom, 1, 31)
    weekday_ok = (moment.isoweekday() % 7) in expand(dow, 0, 7, weekday=True)
    both_restricted = dom != "*" and dow != "*"
    days = (day_ok or weekday_ok) if both_restricted else (day_ok and weekday_ok)
    return (
        moment.minute in expand(minute, 0, 59)
        and moment.hour in expand(hour, 0, 23)
        and moment.month in expand(month, 1, 12)
        and days
    )


@settings(max_examples=max(150, settings.default.max_examples))
@given(
    minute=field(0, 59),
    hour=field(0, 23),
    dom=field(1, 28),
    dow=field(0, 6, weekday=True),
    offset=st.integers(0, 400 * 24 * 60),
)
def test_fire_times_agree_with_cronsim_and_the_rules(
    minute: str, hour: str, dom: str, dow: str, offset: int
) -> None:
    expr = f"{minute} {hour} {dom} * {dow}"
    now = MONDAY + timedelta(minutes=offset)
    spec = parse_schedule(expr, now=now, timezone="UTC")
    reference = CronSim(expr, now)
    previous = None
    for _ in range(4):
        fire = spec.next_after(previous, now if previous is None else previous)
        assert fire is not None
        assert fire == next(reference)
        assert fire > now and matches(expr, fire)
        # Nothing in between was skipped: no matching minute lies between two fire times.
        if previous is not None and fire - previous <= timedelta(hours=3):
            gap = previous + timedelta(minutes=1)
            while gap < fire:
                assert not matches(expr, gap)
                gap += timedelta(minutes=1)
        previous = fire
