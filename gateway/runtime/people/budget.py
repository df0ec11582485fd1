"""What one person may use: turns per hour and model tokens per day (threat T37).

An allowed user can still run up the owner's bill ("denial of wallet"): a script sending a
message a second, or a stream of requests that each burn a long tool loop. The per-turn caps
bound one turn; these bound a person. Before a chat turn calls the model, the person's
recorded usage (``usage.principal``: every model call charged to them, reflection and
summaries included; rolling windows, so no time zone decides when it refills) is compared
with ``[limits]``; over either limit the turn ends without a model
call. The owner (whose wallet it is) is never limited.

The refusal is told once per ``NOTICE_EVERY`` per person, so a flood gets one notice rather
than an answer each; the rest are audited (``budget``) and get no reply.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agent.request import TurnOutcome
from gateway.config.settings import LimitSettings
from gateway.core.messages import ChatRef, InboundMessage, OutboundKind, OutboundMessage
from gateway.core.principal import Principal
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


class UserBudget:
    def __init__(
        self,
        usage: UsageReport,
        audit: AuditLog,
        limits: LimitSettings,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._usage = usage
        self._audit = audit
        self._limits = limits
        self._clock = clock
        self._noticed: OrderedDict[str, float] = OrderedDict()

    def configure(self, limits: LimitSettings) -> None:
        """New limits (a configuration reload); they count from the next turn on."""
        self._limits = limits

    async def check(self, principal: Principal) -> Refusal | None:
        """``None`` when the person may have this turn; else why not, and what to tell them."""
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
        await self._audit.record(
            "budget", channel=principal.channel, sender_id=principal.sender_id, reason=reason
        )
        return Refusal(reason, self._notice(key, now, f"{text} Please try again {later}."))

    def _notice(self, key: str, now: float, text: str) -> str | None:
        last = self._noticed.get(key)
        if last is not None and now - last < NOTICE_EVERY:
            return None
        self._noticed[key] = now
        self._noticed.move_to_end(key)
        while len(self._noticed) > MAX_TRACKED:
            self._noticed.popitem(last=False)
        return text

    async def refused(
        self,
        principal: Principal,
        chat: ChatRef,
        turn_id: str,
        *,
        reply_to: InboundMessage | None = None,
        prefix: str = "",
    ) -> TurnOutcome | None:
        """``None`` when the person's allowance covers this turn; else its outcome: no model
        call, and a notice in ``chat`` unless they were told recently."""
        refusal = await self.check(principal)
        if refusal is None:
            return None
        log.info("turn %s not run: %s", turn_id, refusal.reason)
        if refusal.notice is None:
            return TurnOutcome(final_text=refusal.reason)
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
        return TurnOutcome((notice,), final_text=notice.text)
