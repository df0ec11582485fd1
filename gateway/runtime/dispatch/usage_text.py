"""``/usage``: what a person spent and what their caps leave them; ``/usage footer on|off``:
tokens and cost under each of their answers.

A member sees their own spending and caps only (what others spend is no member's business);
the owner sees theirs and every cap of the gateway (its own, background work's, each
agent's). Tokens a model's server did not report (counted by us) are marked ≈.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agent.llm.metered import UsageEntry
from agent.llm.types import Usage
from gateway.core.clock import day_start
from gateway.core.principal import Principal
from gateway.core.usage import usd
from gateway.runtime.people.spend import CapState, Period, SpendCaps
from gateway.store import People, UsageReport, UsageTotals

FOOTER_USAGE = "Usage: /usage footer on (tokens and cost under each answer) or /usage footer off."


class UsageText:
    def __init__(self, usage: UsageReport, people: People, caps: SpendCaps) -> None:
        self._usage = usage
        self._people = people
        self._caps = caps  # and the limits of [limits] they were last configured with

    async def render(self, args: Sequence[str], principal: Principal) -> str:
        """The answer to ``/usage`` with ``args`` (the words after it)."""
        if args and args[0].lower() == "footer":
            return await self._footer(principal, [a.lower() for a in args[1:]])
        day = day_start(datetime.now(self._caps.zone))
        lines = ["Your usage:"]
        for label, since in (("today", day), ("this month", day.replace(day=1))):
            spent = await self._usage.spent(since.timestamp(), principal=principal.person)
            lines.append(f"- {label}: {spent_text(spent)}")
        lines.append(self._token_limits(principal))
        lines += await self._money(principal)
        shown = "on" if await self._people.footer(principal.person) else "off"
        lines.append(f"Usage footer: {shown} (/usage footer on|off).")
        return "\n".join(lines)

    def _token_limits(self, principal: Principal) -> str:
        if principal.is_owner:
            return "Limits: none (you are the owner)."
        limits = self._caps.limits
        daily = f"{limits.user_daily_tokens:,} tokens a day" if limits.user_daily_tokens else ""
        hourly = f"{limits.user_turns_per_hour} turns an hour" if limits.user_turns_per_hour else ""
        return f"Limits: {' and '.join(x for x in (daily, hourly) if x) or 'none'}."

    async def _money(self, principal: Principal) -> list[str]:
        """The caps that hold the person's turns (a member's: theirs and the gateway's),
        with what is spent; the owner's: every cap configured, and each member's."""
        caps = self._caps.person_caps(principal)
        if principal.is_owner:
            caps += [c for c in self._caps.configured() if c not in caps]
        else:
            caps += [c for c in self._caps.gateway_caps() if c not in caps]
        states = await self._caps.states(caps)
        members = self._caps.member_caps() if principal.is_owner else []
        if not states and not members:
            return [
                "Money: no caps set." if principal.is_owner else "Money: no cap applies to you."
            ]
        lines = [f"- {self._cap_line(state)}" for state in states]
        lines += [
            f"- Each member {_within(period)}: cap {usd(limit)} ({key})"
            for key, period, limit in members
        ]
        return ["Money:", *lines]

    def _cap_line(self, state: CapState) -> str:
        cap = state.cap
        which = _within(cap.period)
        who = {
            "person": "You",
            "gateway": "Everyone",
            "background": "Background work",
            "agent": f"Agent {cap.spender.subject}",
        }[cap.spender.scope]
        return (
            f"{who} {which} (cap {usd(cap.limit_usd)}): {usd(state.spent_usd)} spent, "
            f"{usd(max(0.0, state.left_usd))} left; resets {self._caps.resets(state)}"
        )

    async def _footer(self, principal: Principal, args: Sequence[str]) -> str:
        if args not in (["on"], ["off"]):
            return FOOTER_USAGE
        on = args == ["on"]
        await self._people.set_footer(principal.person, on)
        if on:
            return "From now on I add the tokens and cost of each answer under it (/usage footer off to stop)."
        return "No more usage footer under my answers."


def _within(period: Period) -> str:
    return "today" if period == "day" else "this month"


def spent_text(spent: UsageTotals) -> str:
    """One period's line: "12,345 tokens in 3 turns, $0.0123" (≈: some counted by us)."""
    tokens = spent.input_tokens + spent.output_tokens
    about = "≈ " if spent.estimated_tokens else ""
    turns = f"{spent.turns} turn" + ("" if spent.turns == 1 else "s")
    cost = "" if spent.cost_usd is None else f", ${spent.cost_usd:.4f}"
    return f"{about}{tokens:,} tokens in {turns}{cost}"


def footer(entries: Sequence[UsageEntry]) -> str:
    """What a turn used, for under its answer: "— 1,234 tokens in, 56 out · $0.0031"."""
    total = sum((e.usage for e in entries), Usage())
    if not (total.input_tokens or total.output_tokens):
        return ""
    about = "≈ " if total.estimated_tokens else ""
    tokens = f"{about}{total.input_tokens:,} tokens in, {total.output_tokens:,} out"
    if total.cost_usd is None:
        return f"— {tokens} · no price known for {', '.join(sorted({e.model for e in entries}))}"
    return f"— {tokens} · ${total.cost_usd:.4f}"
