"""What a turn may use before it starts: a person's turns and tokens, and the money caps
(threat T37).

An allowed user can still run up the owner's bill ("denial of wallet"): a script sending a
message a second, or a stream of requests that each burn a long tool loop. The per-turn caps
bound one turn; these bound a person. Before a chat turn calls the model, the person's
recorded usage (``usage.principal``: every model call charged to them, reflection and
summaries included; rolling windows, so no time zone decides when it refills) is compared
with ``[limits]``; over either limit the turn ends without a model
call. The owner (whose wallet it is) is never limited by these.

Then the money caps (:mod:`gateway.runtime.people.spend`): a turn past one of its caps is
refused with when the cap resets; one within them starts with what the tightest cap has
left (:class:`agent.llm.metered.Allowance`), and the model makes no call whose estimate
would pass it (it asks for a shorter answer where what is left pays only that). A
scheduled job or background task is refused the same way; the heartbeat skips its
check-ins instead (gateway/runtime/schedule/heartbeat.py).

The refusal is told once per ``NOTICE_EVERY`` per person, so a flood gets one notice rather
than an answer each; the rest are audited (``budget``) and get no reply. The owner's
background work paused by the gateway's caps tells nobody: the owner was told when the cap
was reached (gateway/runtime/people/spend_notices.py).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agent.llm.metered import Allowance
from agent.request import TurnOutcome
from gateway.config.settings import LimitSettings
from gateway.core.addressing import DEFAULT_AGENT
from gateway.core.messages import ChatRef, InboundMessage, OutboundKind, OutboundMessage
from gateway.core.principal import Principal
from gateway.core.usage import usd
from gateway.runtime.people.spend import CapState, SpendCaps
from gateway.store import AuditLog, UsageReport

log = logging.getLogger(__name__)

HOUR = 3_600.0
DAY = 24 * HOUR
NOTICE_EVERY = 600.0  # seconds between two "over your allowance" notices to one person
MAX_TRACKED = 10_000  # people whose last notice time is remembered


@dataclass(frozen=True, slots=True)
class Refusal:
    """A turn not run: ``notice`` is what the person is told, or ``None`` (told recently)."""

    reason: str
    notice: str | None


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a turn may start: ``refusal`` when not; else what the money caps leave it
    (``allowance``; ``None``: no cap applies)."""

    refusal: Refusal | None = None
    allowance: Allowance | None = None


@dataclass(frozen=True, slots=True)
class TurnAdmission:
    """A turn's start as its handler needs it: the outcome of a refused turn (a notice at
    most, no model call), or what the admitted one may spend."""

    refused: TurnOutcome | None = None
    allowance: Allowance | None = None


class UserBudget:
    def __init__(
        self,
        usage: UsageReport,
        audit: AuditLog,
        limits: LimitSettings,
        *,
        spend: SpendCaps | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._usage = usage
        self._audit = audit
        self._limits = limits
        self._spend = spend
        self._clock = clock
        self._noticed: OrderedDict[str, float] = OrderedDict()

    def configure(self, limits: LimitSettings) -> None:
        """New limits (a configuration reload); they count from the next turn on."""
        self._limits = limits
        if self._spend is not None:
            self._spend.configure(limits)

    async def check(self, principal: Principal) -> Refusal | None:
        """``None`` when the person may have a turn with the default agent now; else why
        not, and what to tell them."""
        return (await self.admit(principal)).refusal

    async def admit(
        self, principal: Principal, *, agent: str = DEFAULT_AGENT, background: bool = False
    ) -> Admission:
        """Whether a turn of ``principal`` with ``agent`` (``background``: a job, the
        heartbeat or a background task) may start, and what it may spend."""
        refusal = await self._tokens(principal)
        if refusal is not None:
            return Admission(refusal)
        spend = self._spend
        if spend is None or not spend.any:
            return Admission()
        states = await spend.states(spend.turn_caps(principal, agent=agent, background=background))
        reached = next((s for s in states if s.reached), None)
        if reached is None:
            return Admission(allowance=spend.allowance(states))
        return Admission(await self._over_cap(principal, reached))

    async def _tokens(self, principal: Principal) -> Refusal | None:
        """A member past their turns an hour or tokens a day, or ``None``."""
        limits = self._limits
        if principal.is_owner or not (limits.user_daily_tokens or limits.user_turns_per_hour):
            return None
        key = principal.person
        now = self._clock()
        used = await self._usage.by_principal(key, since=now - DAY, turns_since=now - HOUR)
        if limits.user_turns_per_hour and used.turns >= limits.user_turns_per_hour:
            reason = f"{used.turns} turns in the last hour (limit {limits.user_turns_per_hour})"
            text = "You're sending me more requests than I can take on right now."
            later = "in a while"
        elif limits.user_daily_tokens and used.tokens >= limits.user_daily_tokens:
            reason = f"{used.tokens} tokens in 24 hours (limit {limits.user_daily_tokens})"
            text = "You've used today's allowance of my time."
            later = "later (it refills over 24 hours)"
        else:
            return None
        return await self._refusal(principal, reason, f"{text} Please try again {later}.")

    async def _over_cap(self, principal: Principal, state: CapState) -> Refusal:
        assert self._spend is not None
        cap = state.cap
        reason = f"{cap.key} = {cap.limit_usd:g} reached (${state.spent_usd:.4f} spent)"
        which = "today's" if cap.period == "day" else "this month's"
        resets = self._spend.resets(state)
        scope = cap.spender.scope
        if scope == "person":
            text = f"You've used {which} allowance of my time ({usd(cap.limit_usd)})."
        elif scope == "agent":
            text = f"This assistant has used {which} spending limit set for it."
        elif scope == "background":
            text = f"Background work is paused: {which} spending limit for it is used."
        else:
            text = f"I've used {which} spending limit, so I can't take on more right now."
        told = scope in ("person", "agent") or not principal.is_owner  # else told at 100 %
        return await self._refusal(principal, reason, f"{text} It resets {resets}.", tell=told)

    async def _refusal(
        self, principal: Principal, reason: str, text: str, *, tell: bool = True
    ) -> Refusal:
        await self._audit.record(
            "budget", channel=principal.channel, sender_id=principal.sender_id, reason=reason
        )
        notice = self._notice(principal.person, self._clock(), text) if tell else None
        return Refusal(reason, notice)

    def _notice(self, key: str, now: float, text: str) -> str | None:
        last = self._noticed.get(key)
        if last is not None and now - last < NOTICE_EVERY:
            return None
        self._noticed[key] = now
        self._noticed.move_to_end(key)
        while len(self._noticed) > MAX_TRACKED:
            self._noticed.popitem(last=False)
        return text

    async def admit_turn(
        self,
        principal: Principal,
        chat: ChatRef,
        turn_id: str,
        *,
        agent: str = DEFAULT_AGENT,
        background: bool = False,
        reply_to: InboundMessage | None = None,
        prefix: str = "",
        tell: bool = True,
    ) -> TurnAdmission:
        """What the turn may spend when it may start; else its outcome: no model call, and
        a notice in ``chat`` unless they were told recently (or ``tell`` is off)."""
        admission = await self.admit(principal, agent=agent, background=background)
        refusal = admission.refusal
        if refusal is None:
            return TurnAdmission(allowance=admission.allowance)
        log.info("turn %s not run: %s", turn_id, refusal.reason)
        if refusal.notice is None or not tell:
            return TurnAdmission(TurnOutcome(final_text=refusal.reason))
        notice = OutboundMessage(
            channel=chat.channel,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            text=prefix + refusal.notice,
            kind=OutboundKind.NOTICE,
            reply_to_message_id=(
                reply_to.platform_message_id if reply_to and reply_to.is_group else None
            ),
            turn_id=turn_id,
            idempotency_key=f"{turn_id}:reply",
        )
        return TurnAdmission(TurnOutcome((notice,), final_text=notice.text))
