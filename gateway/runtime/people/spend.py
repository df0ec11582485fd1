"""Money caps: which apply to a turn, how much of each is spent, and what that means.

The caps (US dollars at the prices of ``[llm.prices]``; 0 or unset: no cap):

- ``limits.gateway_daily_usd`` / ``limits.gateway_monthly_usd``: everything the gateway
  spends. Past one, members' turns and background work are refused; the owner's own turns
  go on (it is their wallet, and they were told).
- ``limits.person_daily_usd`` / ``limits.person_monthly_usd``: each member's own spending
  (every model call charged to them: their turns, their jobs and background tasks, the
  summaries and memory updates after their turns). ``[people."<channel>:<id>"]``
  ``daily_usd`` / ``monthly_usd`` give one person another cap (0: none), and are the only
  way to cap the owner.
- ``limits.background_daily_usd``: heartbeat check-ins, scheduled jobs and background tasks
  together (gateway.store.metering.usage.BACKGROUND_CHANNELS).
- ``[agents.<name>]`` ``daily_usd`` / ``monthly_usd``: one agent's spending, everyone's
  turns with it included (the owner set it for that agent).

A day and a month are the owner's (``user.timezone``): a cap starts afresh at local
midnight, a monthly one on the 1st. The store is the truth, so the caps hold across
restarts and for every node of a cluster: what was spent is summed from the usage table
(today's rows in one statement; a month's earlier days are summed once a day and kept).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from agent.llm.metered import Allowance
from gateway.config.agents import AgentProfile
from gateway.config.people import config_table
from gateway.config.settings import LimitSettings
from gateway.core.clock import day_start
from gateway.core.principal import Principal, Role
from gateway.core.schedule_spec import zone
from gateway.core.usage import usd
from gateway.runtime.people.directory import ConfiguredPerson
from gateway.store import Spender, UsageReport

Period = Literal["day", "month"]


@dataclass(frozen=True, slots=True)
class Cap:
    """One money cap: ``key`` is the setting that made it."""

    key: str
    spender: Spender
    period: Period
    limit_usd: float


@dataclass(frozen=True, slots=True)
class CapState:
    """How much of one cap is spent in its current period."""

    cap: Cap
    spent_usd: float
    starts: datetime  # the period's start, in the owner's zone
    resets: datetime  # the next period's start

    @property
    def used(self) -> float:
        """The share spent: 1.0 and above is the cap reached."""
        return self.spent_usd / self.cap.limit_usd

    @property
    def left_usd(self) -> float:
        return max(0.0, self.cap.limit_usd - self.spent_usd)

    @property
    def reached(self) -> bool:
        return self.spent_usd >= self.cap.limit_usd

    @property
    def period_key(self) -> str:
        """The day (``2026-11-27``) or month (``2026-11``) the state counts."""
        return self.starts.strftime("%Y-%m-%d" if self.cap.period == "day" else "%Y-%m")


class SpendCaps:
    """The money caps of the configuration, and what is spent of each."""

    def __init__(
        self,
        usage: UsageReport,
        limits: LimitSettings,
        *,
        people: Mapping[str, ConfiguredPerson],
        agents: Mapping[str, AgentProfile],
        timezone: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._usage = usage
        self._limits = limits
        self._people = people
        self._agents = agents
        self.zone = zone(timezone)
        self._clock = clock
        # a month's spending before today, per spender: (month start, today) -> dollars
        self._earlier: dict[tuple[Spender, float, float], float] = {}
        # Whether any money cap is set at all (without one nothing is ever read); known
        # from the configuration, so a turn asks nothing to learn it.
        self.any = self._any()

    def configure(self, limits: LimitSettings) -> None:
        """New ``[limits]`` (a configuration reload); they count from the next turn on."""
        self._limits = limits
        self.any = self._any()

    @property
    def limits(self) -> LimitSettings:
        return self._limits

    def _any(self) -> bool:
        limits = self._limits
        return bool(
            limits.gateway_daily_usd
            or limits.gateway_monthly_usd
            or limits.person_daily_usd
            or limits.person_monthly_usd
            or limits.background_daily_usd
            or any(p.settings.daily_usd or p.settings.monthly_usd for p in self._people.values())
            or any(a.daily_usd or a.monthly_usd for a in self._agents.values())
        )

    # -- which caps ----------------------------------------------------------------------

    def gateway_caps(self) -> list[Cap]:
        limits, everyone = self._limits, Spender("gateway")
        return _caps(
            ("limits.gateway_daily_usd", everyone, "day", limits.gateway_daily_usd),
            ("limits.gateway_monthly_usd", everyone, "month", limits.gateway_monthly_usd),
        )

    def background_caps(self) -> list[Cap]:
        limit = self._limits.background_daily_usd
        return _caps(("limits.background_daily_usd", Spender("background"), "day", limit))

    def person_caps(self, principal: Principal) -> list[Cap]:
        """A member's caps (``[limits]``, or their own in ``[people]``); the owner's only
        where ``[people]`` sets them."""
        configured = self._people.get(principal.person)
        own = None if configured is None else configured.settings
        spender = Spender("person", principal.person)
        limits = self._limits
        caps = []
        periods: tuple[tuple[Period, float | None, float], ...] = (
            ("day", None if own is None else own.daily_usd, limits.person_daily_usd),
            ("month", None if own is None else own.monthly_usd, limits.person_monthly_usd),
        )
        for period, mine, default in periods:
            name = period_name(period)
            if configured is not None and mine is not None:
                table = config_table(configured.name)
                caps += _caps((f"{table}.{name}_usd", spender, period, mine))
            elif not principal.is_owner:
                caps += _caps((f"limits.person_{name}_usd", spender, period, default))
        return caps

    def member_caps(self) -> list[tuple[str, Period, float]]:
        """The caps ``[limits]`` gives each member: (key, period, limit)."""
        limits = self._limits
        found: tuple[tuple[str, Period, float], ...] = (
            ("limits.person_daily_usd", "day", limits.person_daily_usd),
            ("limits.person_monthly_usd", "month", limits.person_monthly_usd),
        )
        return [(key, period, limit) for key, period, limit in found if limit]

    def agent_caps(self, agent: str) -> list[Cap]:
        profile = self._agents.get(agent)
        if profile is None:
            return []
        spender = Spender("agent", agent)
        return _caps(
            (f"agents.{agent}.daily_usd", spender, "day", profile.daily_usd),
            (f"agents.{agent}.monthly_usd", spender, "month", profile.monthly_usd),
        )

    def configured(self) -> list[Cap]:
        """Every cap of the configuration that names its spender (a member's cap of
        ``[limits]`` applies to each member, so it is not one of them)."""
        caps = self.gateway_caps() + self.background_caps()
        for agent in self._agents:
            caps += self.agent_caps(agent)
        for person in self._people:
            channel, _, sender = person.partition(":")
            # as the owner's: only the caps [people] gives them
            caps += self.person_caps(Principal(channel, sender, role=Role.OWNER))
        return caps

    def turn_caps(self, principal: Principal, *, agent: str, background: bool) -> list[Cap]:
        """The caps a turn must stay within: its person's and its agent's; a member's turn
        and background work the gateway's too; background work its own."""
        caps = self.person_caps(principal) + self.agent_caps(agent)
        if background:
            caps += self.background_caps()
        if background or not principal.is_owner:
            caps += self.gateway_caps()
        return caps

    # -- what is spent ---------------------------------------------------------------------

    async def states(self, caps: Sequence[Cap]) -> list[CapState]:
        """Each cap with what its current period has spent (one statement over today's
        rows; a month's earlier days once a day)."""
        if not caps:
            return []
        today = day_start(datetime.fromtimestamp(self._clock(), self.zone))
        tomorrow = today + timedelta(days=1)
        month = today.replace(day=1)
        next_month = (month + timedelta(days=32)).replace(day=1)
        spenders = list(dict.fromkeys(cap.spender for cap in caps))
        spent = await self._usage.spending(spenders, since=today.timestamp())
        spent_today = dict(zip(spenders, spent, strict=True))
        states = []
        for cap in caps:
            so_far = spent_today[cap.spender]
            if cap.period == "day":
                states.append(CapState(cap, so_far, today, tomorrow))
                continue
            so_far += await self._month_before(cap.spender, month, today)
            states.append(CapState(cap, so_far, month, next_month))
        return states

    async def _month_before(self, spender: Spender, month: datetime, today: datetime) -> float:
        """What ``spender`` spent this month before today (earlier days change no more)."""
        if month == today:
            return 0.0
        key = (spender, month.timestamp(), today.timestamp())
        if key not in self._earlier:
            if len(self._earlier) > MAX_KEPT:
                self._earlier.clear()
            [spent] = await self._usage.spending(
                [spender], since=month.timestamp(), until=today.timestamp()
            )
            self._earlier[key] = spent
        return self._earlier[key]

    def over(self, state: CapState) -> bool:
        """Whether ``state``'s period is over (its cap started afresh since)."""
        return self._clock() >= state.resets.timestamp()

    # -- in words --------------------------------------------------------------------------

    def resets(self, state: CapState) -> str:
        """When a cap starts afresh: "in 5 h 12 min (at 00:00 UTC)"."""
        now = self._clock()
        when = (
            f"at 00:00 {self.zone.key}"
            if state.cap.period == "day"
            else f"on {state.resets.day} {state.resets:%B}, {self.zone.key}"
        )
        wait = timedelta(seconds=state.resets.timestamp() - now)
        return f"in {span(wait)} ({when})"

    def allowance(self, states: Sequence[CapState]) -> Allowance | None:
        """What a turn may spend: the least any of its caps has left."""
        if not states:
            return None
        tightest = min(states, key=lambda s: s.left_usd)
        cap = tightest.cap
        return Allowance(
            tightest.left_usd, describe(cap), self.resets(tightest), cap.limit_usd, cap.key
        )


MAX_KEPT = 10_000  # (spender, month, day) sums kept; a new day makes the old ones useless


def _caps(*specs: tuple[str, Spender, Period, float]) -> list[Cap]:
    return [Cap(key, spender, period, limit) for key, spender, period, limit in specs if limit]


def period_name(period: Period) -> str:
    return "daily" if period == "day" else "monthly"


def span(delta: timedelta) -> str:
    """A time to wait, as a person reads it: "5 h 12 min", "3 days"."""
    minutes = max(1, round(delta.total_seconds() / 60))
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    return f"{round(hours / 24)} days"


def describe(cap: Cap) -> str:
    """A cap as the one its turn runs into: "your daily allowance of $0.50"."""
    which = "today's" if cap.period == "day" else "this month's"
    money = usd(cap.limit_usd)
    scope = cap.spender.scope
    if scope == "person":
        return f"your {period_name(cap.period)} allowance of {money}"
    if scope == "agent":
        return f"{which} spending limit of the agent {cap.spender.subject} ({money})"
    if scope == "background":
        return f"{which} spending limit for background work ({money})"
    return f"{which} spending limit of this assistant ({money})"
