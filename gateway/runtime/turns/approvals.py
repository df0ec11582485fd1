"""Approval requests, from the runtime's side: ask, decide, expire, wake the waiting turn.

When a turn stops at a call that needs approval (:mod:`agent.approval`), the turn is
*parked* rather than held open: :meth:`Approvals.park` stores the request, queues it to
the approvers (buttons where the platform has them) and tells the requester it waits, in one
transaction; the dispatcher then keeps that chat's later messages back (per-chat order) while
every other chat goes on, and no turn slot or model slot is held however long the decision
takes. ``/approve ID`` and ``/deny ID`` (typed, or sent by a button) reach
:meth:`Approvals.decide` as commands; a request nobody decides within
``tools.approval_timeout_seconds`` is refused (:meth:`Approvals.expire_due`, on the
gateway's clock). Each decision wakes the turn, which resumes at the waiting call and finds
it there. Everything is audited: every request, decision, expiry, and every attempt by
someone who may not decide.

Who decides: the owners of the requester's channel, and its admins unless only the owner
may allow it (a tool denied to admins); and the owner at the machine (the terminal, the
local web chat), who could decide anything there anyway. A request goes to the requester's own direct chat
when they may decide it themselves (an owner or admin whose turn read outside content),
else to the channel's owners (to its admins when it has no owner). Channels without access
settings (the terminal, the local web chat) belong to whoever uses them: it goes back there.
A webhook and an API token other than the owner's have no owner of their own: as on a
channel without owners, the owners of the chat channels are asked (in their direct chats,
with buttons that work), and the requester is told it waits; the owner's own API token is
asked in its own session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

from agent.approval import PendingCall, fingerprint
from agent.request import TurnRequest
from gateway.config.channels import ChannelSection
from gateway.core.addressing import API_CHANNEL, INTERNAL_CHANNELS, PROGRAM_CHANNELS
from gateway.core.clock import Clock
from gateway.core.lifecycle import Service
from gateway.core.messages import (
    Attachment,
    ChatRef,
    ChatType,
    InboundMessage,
    OutboundKind,
    OutboundMessage,
)
from gateway.core.principal import Principal, Role
from gateway.core.turns import TurnKind
from gateway.runtime.people.directory import PeopleDirectory
from gateway.runtime.turns import approval_text as text
from gateway.store import (
    ApprovalRequest,
    ApprovalState,
    InboundRecord,
    OpenTurn,
    Store,
    UsageRecord,
)
from gateway.store.approvals import approval_id

log = logging.getLogger(__name__)

SHOWN_KEY = "approval-shown:"  # + request id -> who was sent it in full (/show)
NOT_ALLOWED = "Only the owner or an admin of this chat can decide approval requests."


class Approvals(Service):
    def __init__(
        self,
        store: Store,
        sections: Mapping[str, ChannelSection],
        *,
        clock: Clock,
        timeout: float,
        redact: Callable[[str], str] = lambda value: value,
        on_outbound: Callable[[str], None] = lambda channel: None,
        wake: Callable[[str], None] = lambda turn_id: None,
        directory: PeopleDirectory | None = None,
        control_center: bool = False,
    ) -> None:
        self._store = store
        # the owner's Approvals page is served (web.enabled): a request nobody on a chat
        # channel can decide waits there rather than being refused
        self._control_center = control_center
        self._directory = directory  # an owner or admin decides from any address of theirs
        self._sections = sections
        self._clock = clock
        self.timeout = timeout
        self._redact = redact
        self._on_outbound = on_outbound
        self._wake = wake  # a parked turn was decided: it may resume (the bus's wake_turn)
        self._changed = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None

    # -- lifecycle: the expiry timer --------------------------------------------------------

    async def start(self) -> None:
        if self._timer is None:
            self._timer = asyncio.create_task(self._expire_forever(), name="approval-expiry")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
            self._timer = None

    async def _expire_forever(self) -> None:
        while True:
            self._changed.clear()  # before the read: a park after it wakes the sleep below
            pending = await self._store.approval_requests.pending()
            if pending:
                when = datetime.fromtimestamp(pending[0].expires_at, UTC)
            else:
                when = self._clock.now() + timedelta(days=1)
            await self._clock.sleep_until(when, self._changed)
            try:
                await self.expire_due()
            except Exception:  # the next round tries again; never let the timer die
                log.exception("approvals: expiring overdue requests failed")

    async def expire_due(self) -> list[ApprovalRequest]:
        """Refuse every pending request past its time and wake its turn (fail closed)."""
        now = self._clock.now().timestamp()
        expired = []
        for record in await self._store.approval_requests.pending():
            if record.expires_at > now:
                break
            decided = await self._store.approval_requests.decide(
                record.id, ApprovalState.EXPIRED, by="timeout", at=now
            )
            if decided is not None:
                await self._audit("approval-expired", decided)
                self._wake(decided.turn_id)
                expired.append(decided)
        return expired

    async def waiting_turns(self) -> set[str]:
        """Turns parked on a pending request (after a restart: they stay parked)."""
        return {record.turn_id for record in await self._store.approval_requests.pending()}

    async def withdraw(self, turn_id: str, *, by: str) -> None:
        """The turn that asked was stopped: its pending requests are refused, so a press
        that comes later decides nothing."""
        now = self._clock.now().timestamp()
        for record in await self._store.approval_requests.pending():
            if record.turn_id == turn_id:
                await self._store.approval_requests.decide(
                    record.id, ApprovalState.REFUSED, by=f"stopped by {by}", at=now
                )

    # -- asking -----------------------------------------------------------------------------

    async def park(
        self,
        request: TurnRequest,
        ask: PendingCall,
        records: tuple[InboundRecord, ...],
        usage: Sequence[UsageRecord] = (),
    ) -> OpenTurn:
        """Store the request, ask the approvers, tell the requester; returns the turn to
        hold. With nobody to ask, the request is refused at once and the turn wakes."""
        principal = request.principal
        approvers, targets = self._who(principal, request.chat, ask.authority)
        waits = bool(targets) or self._control_center
        now = self._clock.now().timestamp()
        record = ApprovalRequest(
            id=approval_id(ask.call_key),
            call_key=ask.call_key,
            turn_id=ask.turn_id,
            session_key=request.session_key,
            tool=ask.tool,
            arguments=text.shown_arguments(ask.arguments, self._redact),
            fingerprint=fingerprint(ask.arguments),
            reason=text.approver_reason(ask.reason),
            reach=self._redact(ask.reach),
            requester={**asdict(principal), "chat_type": principal.chat_type.value},
            approvers=approvers,
            state=ApprovalState.PENDING if waits else ApprovalState.REFUSED,
            created_at=now,
            expires_at=now + self.timeout,
            decided_at=None if waits else now,
            decided_by=None
            if waits
            else f"no owner or admin is configured for {principal.channel}, nor on any "
            "other channel, and the control center is off (web.enabled)",
        )
        messages = self._messages(record, request, targets, ask.files)
        await self._store.park_turn(approval=record, messages=messages, usage=usage)
        stored = await self._store.approval_requests.get(record.id) or record
        await self._audit("approval-asked" if stored.pending else "approval-unavailable", stored)
        for channel in {m.channel for m in messages}:
            self._on_outbound(channel)
        self._changed.set()  # the timer plans for the new expiry
        if not stored.pending:
            self._wake(stored.turn_id)
        return OpenTurn(request.turn_id, request.session_key, TurnKind.CHAT, 1, records)

    def _who(
        self, principal: Principal, chat: ChatRef, authority: Role
    ) -> tuple[tuple[str, ...], list[tuple[ChatRef, bool]]]:
        """Who may decide (``channel:id``), and where the request goes (chat, direct): the
        channel's owners (or admins, where an admin may allow it); on a channel without
        them, the owners of the other channels, in their direct chats; with none anywhere,
        nobody is sent it (the owner at the machine decides: the control center, the
        terminal)."""
        channel = principal.channel
        section = self._sections.get(channel)
        if section is None and channel not in PROGRAM_CHANNELS:
            return (f"{channel}:*",), [(chat, False)]  # a local channel: its user is the owner
        if section is None:  # a webhook or an API token: no owner of its own
            if channel == API_CHANNEL and principal.is_owner:  # the owner's token: its own words
                return (f"{channel}:{principal.sender_id}",), [(chat, False)]
            return self._owners_elsewhere(channel, (), chat)
        people = [*section.owners, *(section.admins if authority is Role.ADMIN else ())]
        approvers = tuple(f"{channel}:{person}" for person in dict.fromkeys(people))
        if f"{channel}:{principal.sender_id}" in approvers:  # they confirm it themselves
            if principal.chat_type is ChatType.DM:
                return approvers, [(chat, False)]
            return approvers, [(ChatRef(channel, principal.sender_id), True)]
        asked = section.owners or (section.admins if authority is Role.ADMIN else ())
        if asked:
            return approvers, [(ChatRef(channel, person), True) for person in asked]
        return self._owners_elsewhere(channel, approvers, chat)

    def _owners_elsewhere(
        self, channel: str, approvers: tuple[str, ...], chat: ChatRef
    ) -> tuple[tuple[str, ...], list[tuple[ChatRef, bool]]]:
        """For a channel without owners (or admins to ask): the owners of the other
        channels, in their direct chats; and the request's own chat when it is the owner's
        at the machine (a webhook answering in the web chat or the terminal)."""
        elsewhere = [
            ChatRef(name, owner)
            for name, other in self._sections.items()
            if name != channel
            for owner in other.owners
        ]
        targets = [(owner, True) for owner in elsewhere]
        approvers = (*approvers, *(f"{owner.channel}:{owner.chat_id}" for owner in elsewhere))
        if chat.channel not in (*self._sections, *PROGRAM_CHANNELS, *INTERNAL_CHANNELS):
            targets.append((chat, False))
            approvers = (*approvers, f"{chat.channel}:*")
        return approvers, targets

    def _messages(
        self,
        record: ApprovalRequest,
        request: TurnRequest,
        targets: list[tuple[ChatRef, bool]],
        files: tuple[Attachment, ...] = (),
    ) -> list[OutboundMessage]:
        """The request for each approver (after the pictures of what would be done, when
        the tool took any: a browser's click), and the requester's notice."""
        prompt, block = text.request_text(record, timeout=self.timeout)
        messages = []
        for chat, direct in targets:
            if files:
                messages.append(
                    OutboundMessage(
                        channel=chat.channel,
                        chat_id=chat.chat_id,
                        thread_id=chat.thread_id,
                        text=text.pictures_text(record),
                        attachments=files,
                        kind=OutboundKind.NOTICE,
                        idempotency_key=f"approval:{record.id}:{chat.chat_id}:pictures",
                        direct=direct,
                    )
                )
            messages.append(
                OutboundMessage(
                    channel=chat.channel,
                    chat_id=chat.chat_id,
                    thread_id=chat.thread_id,
                    text=prompt,
                    verbatim=block,
                    kind=OutboundKind.NOTICE,
                    idempotency_key=f"approval:{record.id}:{chat.chat_id}",
                    actions=text.request_actions(record),
                    direct=direct,
                )
            )
        if record.pending and all(chat != request.chat for chat, _ in targets):
            section = self._sections.get(request.chat.channel)
            admins = section is not None and not section.owners and bool(targets)
            if admins and all(chat.channel == request.chat.channel for chat, _ in targets):
                whose = "an admin's"  # the channel's admins were asked
            else:
                whose = "the owner's"
            if f"{request.principal.channel}:{request.principal.sender_id}" in record.approvers:
                whose = "your"  # asked in their direct chat
            last = request.last_message
            messages.append(
                OutboundMessage(
                    channel=request.chat.channel,
                    chat_id=request.chat.chat_id,
                    thread_id=request.chat.thread_id,
                    text=text.waiting_text(record, whose=whose, timeout=self.timeout),
                    kind=OutboundKind.NOTICE,
                    reply_to_message_id=last.platform_message_id
                    if last is not None and last.is_group
                    else None,
                    idempotency_key=f"approval:{record.id}:waiting",
                )
            )
        return messages

    # -- deciding ---------------------------------------------------------------------------

    async def decide(self, msg: InboundMessage, principal: Principal, *, approve: bool) -> str:
        """Answer ``/approve ID`` or ``/deny ID`` (or, without an id, list what waits)."""
        words = msg.text.split()[1:]
        if not principal.is_admin:
            await self._store.audit.record(
                "approval-forbidden",
                channel=msg.channel,
                sender_id=msg.sender_id,
                approval=words[0].upper() if words else "",
                reason="not an owner or admin",
            )
            return NOT_ALLOWED
        if msg.is_group:
            return "Approval requests are decided in a direct chat with me."
        if not words:
            addresses = await self._addresses(principal)
            mine = [
                r
                for r in await self._store.approval_requests.pending()
                if self._may(r, principal, addresses)
            ]
            return text.listing_text(mine)
        return await self.resolve(words[0], principal, approve=approve)

    async def resolve(
        self, request_id: str, principal: Principal, *, approve: bool, shown_whole: bool = False
    ) -> str:
        """Decide one request for ``principal``: what ``/approve ID`` and ``/deny ID`` do,
        and the owner's control center. ``shown_whole``: the decider was shown every
        argument in full (the control center shows them so), which counts as ``/show``."""
        record = await self._request_for(request_id, principal)
        if isinstance(record, str):
            return record
        if not record.pending:
            return text.already_text(record)
        by = f"{principal.channel}:{principal.sender_id}"
        seen = (shown_whole and text.reviewable(record)) or await self._was_shown(record, by)
        if approve and text.prompt_was_cut(record) and not seen:
            return text.unseen_text(record)  # never approve what the approver could not see
        now = self._clock.now().timestamp()
        state = ApprovalState.APPROVED if approve else ApprovalState.DENIED
        if record.expires_at <= now:  # the timer has not come round yet: still too late
            state = ApprovalState.EXPIRED
        decided = await self._store.approval_requests.decide(record.id, state, by=by, at=now)
        if decided is None:  # decided a moment ago by someone else, or it just expired
            current = await self._store.approval_requests.get(record.id)
            return text.already_text(current or record)
        await self._audit(f"approval-{state}", decided, by=principal)
        self._wake(decided.turn_id)
        return text.decided_text(decided)

    async def _request_for(self, request_id: str, principal: Principal) -> ApprovalRequest | str:
        """The request ``principal`` may decide, or what to tell them instead (an unknown id,
        or one they may not see: audited)."""
        record = await self._store.approval_requests.get(request_id)
        if record is None:
            return f"There is no approval request {request_id.upper()}."
        if not self._may(record, principal, await self._addresses(principal)):
            await self._audit("approval-forbidden", record, by=principal)
            return NOT_ALLOWED
        return record

    async def show(self, msg: InboundMessage, principal: Principal) -> str:
        """``/show ID``: the whole request, for one who may decide it; from then on their
        ``/approve ID`` counts even when the prompt had to cut an argument."""
        words = msg.text.split()[1:]
        if not principal.is_admin:
            return NOT_ALLOWED
        if msg.is_group:
            return "Approval requests are shown in a direct chat with me."
        if not words:
            return "Usage: /show ID (the id of an approval request)"
        record = await self._request_for(words[0], principal)
        if isinstance(record, str):
            return record
        if text.reviewable(record):
            key = SHOWN_KEY + record.id
            shown = set(await self._store.kv.get(key) or ())
            shown.add(f"{principal.channel}:{principal.sender_id}")
            await self._store.kv.set(key, sorted(shown))
        return text.show_text(record)

    async def _was_shown(self, record: ApprovalRequest, by: str) -> bool:
        return by in (await self._store.kv.get(SHOWN_KEY + record.id) or ())

    async def _audit(
        self, kind: str, record: ApprovalRequest, *, by: Principal | None = None
    ) -> None:
        requester = record.requester
        await self._store.audit.record(
            kind,
            channel=by.channel if by else requester.get("channel"),
            sender_id=by.sender_id if by else requester.get("sender_id"),
            approval=record.id,
            tool=record.tool,
            arguments=record.arguments,
            requester=f"{requester.get('channel')}:{requester.get('sender_id')}",
            reason=record.reason,
            turn=record.turn_id,
            decided_by=record.decided_by,
        )

    async def _addresses(self, principal: Principal) -> set[str]:
        """Every address of ``principal``'s person (their own alone, without a directory)."""
        if self._directory is None:
            return {principal.address}
        return set((await self._directory.identify(principal.address)).addresses)

    def _may(self, record: ApprovalRequest, principal: Principal, addresses: set[str]) -> bool:
        """Whether ``principal`` may decide ``record``: one of its approvers on any address
        of their person (and still an owner or admin), or the owner at the machine (the
        terminal, the local web chat)."""
        if principal.is_owner and principal.channel not in self._sections:
            return True
        keys = {*addresses, f"{principal.channel}:*"}
        return principal.is_admin and bool(keys & set(record.approvers))
