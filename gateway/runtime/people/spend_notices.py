"""Telling the owner how far the money caps are spent: at 50, 80 and 100 %, once each.

After each turn's commit that cost something, the caps that spending counts against (the
gateway's, background work's for background turns, the agent's, the person's) are read
again (:mod:`gateway.runtime.people.spend`). A level a cap passed for the first time in its
period is told to the owner in their home chat (``heartbeat.target``, else the owner's own
direct chat): the notice and its record go into the store in one transaction
(:class:`gateway.store.SpendNotices`), so a restart neither repeats nor loses one and one
node of a cluster tells it. Several levels passed at once are one message (the highest).

A member's own cap is told at 100 % only (with many members, the halfway marks of each
would be noise); the member is told at their next turn, with when it resets.

With no home chat yet (the owner has not written to the assistant directly, and
``heartbeat.target`` is unset) a notice is recorded as told and kept in the store, and sent
once there is one: after the commit of the owner's turn that makes their chat the home, or
after a later turn's commit (the first one of each process looks, so a crash in between
loses none). One that waited past its day or month is dropped: the cap started afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, tzinfo
from typing import Any

from gateway.core.addressing import agent_of
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.core.principal import Principal
from gateway.core.usage import usd
from gateway.runtime.people.spend import Cap, CapState, SpendCaps
from gateway.runtime.turns.accounting import channel_of
from gateway.store import HomeChat, Spender, SpendNotices, UsageRecord, WaitingNotice
from gateway.store.metering.usage import BACKGROUND_CHANNELS

log = logging.getLogger(__name__)

LEVELS = (50, 80, 100)  # percent of a cap
MAX_KEPT = 10_000  # (cap, period) pairs whose told levels are remembered here


class SpendWatch:
    def __init__(
        self,
        caps: SpendCaps,
        notices: SpendNotices,
        *,
        home: Callable[[], Awaitable[HomeChat | None]],
        outbound_ready: Callable[[str], None],
    ) -> None:
        self._caps = caps
        self._notices = notices
        self._home = home  # where the owner is told
        self._outbound_ready = outbound_ready  # wakes the channel's outbox worker
        self._told: dict[tuple[str, str], set[int]] = {}  # what this node knows was told
        # Whether a notice may wait for the owner's home chat: None until this process
        # looked, True from when one waits until they are sent.
        self._waiting: bool | None = None

    async def committed(
        self,
        principal: Principal | None,
        session_key: str,
        usage: Sequence[UsageRecord],
        *,
        home_changed: bool = False,
    ) -> None:
        """A turn of ``session_key`` charged to ``principal`` was committed with ``usage``
        (``home_changed``: and made the owner's chat their home): when it cost money, tell
        the owner of each level its caps passed for the first time; send the notices that
        waited for a home chat. Never raises: a notice is not worth a turn."""
        if not self._caps.any:
            return
        try:
            if any(record.cost_usd for record in usage):
                await self.spent(
                    principal,
                    agent=agent_of(session_key),
                    background=channel_of(session_key) in BACKGROUND_CHANNELS,
                )
            if home_changed or self._waiting is not False:
                await self.send_waiting()
        except Exception:
            log.exception("could not look at the money caps after a turn of %s", session_key)

    async def send_waiting(self) -> None:
        """Send the notices kept while the owner had no home chat, when they have one now;
        those whose day or month is over are dropped."""
        home = await self._home()
        if home is None:
            if self._waiting is None:
                self._waiting = bool(await self._notices.waiting())
            return
        sends = [(notice, self._message(notice, home)) for notice in await self._notices.waiting()]
        queued = await self._notices.send(sends) if sends else []
        for notice in queued:
            log.info("told the owner of %s, which waited for a home chat", notice.cap)
        if queued:
            self._outbound_ready(home.chat.channel)
        self._waiting = False

    def _message(self, waiting: WaitingNotice, home: HomeChat) -> OutboundMessage | None:
        """The message of a notice that waited; ``None`` once its period is over."""
        state, member = kept_state(waiting.detail, self._caps.zone)
        if self._caps.over(state):
            return None
        text = notice_text(state, waiting.level, self._caps.resets(state), member)
        return notice_to(home, text, f"spend:{waiting.cap}:{waiting.period}:{waiting.level}")

    async def spent(self, principal: Principal | None, *, agent: str, background: bool) -> None:
        """Money was spent for ``principal`` with ``agent``: tell the owner of each level
        its caps passed for the first time."""
        caps = self._caps
        chosen = caps.gateway_caps() + caps.agent_caps(agent)
        if background:
            chosen += caps.background_caps()
        if principal is not None:
            chosen += caps.person_caps(principal)
        for state in await caps.states(chosen):
            await self._tell(state, principal)

    async def _tell(self, state: CapState, principal: Principal | None) -> None:
        member = state.cap.spender.scope == "person" and not (principal and principal.is_owner)
        levels = [
            level
            for level in ((100,) if member else LEVELS)
            if state.spent_usd * 100 >= level * state.cap.limit_usd
        ]
        # one cap of everyone's, or one per person: each member's passing is news
        subject = state.cap.spender.subject
        name = f"{state.cap.key}:{subject}" if subject else state.cap.key
        key = (name, state.period_key)
        told = self._told.setdefault(key, set())
        new = [level for level in levels if level not in told]
        if not new:
            return
        if len(self._told) > MAX_KEPT:
            self._told = {key: told}
        home = await self._home()
        if home is None:
            kept = await self._notices.claim(
                name, state.period_key, new, None, waiting=kept_detail(state, member)
            )
            told.update(new)
            if kept:
                self._waiting = True
                log.info(
                    "%s is %d %% spent; the notice waits until the owner has a home chat",
                    state.cap.key,
                    max(new),
                )
            return
        text = notice_text(state, max(new), self._caps.resets(state), member)
        notice = notice_to(home, text, f"spend:{name}:{state.period_key}:{max(new)}")
        recorded = await self._notices.claim(name, state.period_key, new, notice)
        told.update(new)
        if recorded:
            log.info("told the owner: %s", text)
            self._outbound_ready(home.chat.channel)


def notice_to(home: HomeChat, text: str, key: str) -> OutboundMessage:
    """A notice in the owner's home chat (``key``: its idempotency key)."""
    return OutboundMessage(
        channel=home.chat.channel,
        chat_id=home.chat.chat_id,
        thread_id=home.chat.thread_id,
        text=text,
        kind=OutboundKind.NOTICE,
        idempotency_key=key,
    )


def kept_detail(state: CapState, member: bool) -> dict[str, Any]:
    """What a notice that waits for a home chat needs to be written when it is sent (its
    reset told from then, not from when it was kept)."""
    cap = state.cap
    return {
        "key": cap.key,
        "scope": cap.spender.scope,
        "subject": cap.spender.subject,
        "period": cap.period,
        "limit_usd": cap.limit_usd,
        "spent_usd": state.spent_usd,
        "starts": state.starts.timestamp(),
        "resets": state.resets.timestamp(),
        "member": member,
    }


def kept_state(detail: Mapping[str, Any], zone: tzinfo) -> tuple[CapState, bool]:
    """The cap's state a kept notice tells, and whether it is a member's own cap."""
    spender = Spender(detail["scope"], detail["subject"])
    cap = Cap(detail["key"], spender, detail["period"], float(detail["limit_usd"]))
    starts = datetime.fromtimestamp(detail["starts"], zone)
    resets = datetime.fromtimestamp(detail["resets"], zone)
    return CapState(cap, float(detail["spent_usd"]), starts, resets), bool(detail["member"])


def notice_text(state: CapState, level: int, resets: str, member: bool) -> str:
    """The owner's notice that ``state``'s cap passed ``level`` percent."""
    cap = state.cap
    which = "today's" if cap.period == "day" else "this month's"
    money = f"{usd(state.spent_usd)} of {usd(cap.limit_usd)}"
    scope = cap.spender.scope
    if scope == "person":
        whose = f"{cap.spender.subject} has" if member else "You have"
        subject = f"{whose} used {which} allowance ({money}, {cap.key})"
    elif scope == "agent":
        subject = f"The agent {cap.spender.subject} has used {which} spending limit ({money})"
    elif scope == "background":
        subject = f"Background work has used {which} spending limit ({money})"
    else:
        subject = f"{which.capitalize()} spending is {money} ({cap.key})"
    if level < 100:
        return f"Spending: {level} % used. {subject}. It resets {resets}."
    after = {
        "person": "their turns are refused" if member else "your turns are refused",
        "agent": "its turns are refused",
        "background": "the heartbeat, scheduled jobs and background tasks are paused",
        "gateway": "members' turns and background work are refused; your own turns go on",
    }[scope]
    return f"Spending limit reached. {subject}: {after} until it resets {resets}."
