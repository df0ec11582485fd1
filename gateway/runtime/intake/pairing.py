"""Deciding pairing requests, shared by the CLI (:mod:`gateway.cli.admin`) and the /pair
command of admin chats."""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.config.channels import ChannelSection
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.core.text.textutil import shown_name
from gateway.store import AuditLog, Outbox, PairingRequest, Pairings, Store

WELCOME = "You're approved - welcome! Just write to me like you would to a colleague."


def young_accounts(section: ChannelSection, *, now: float) -> Callable[[str], bool]:
    """Which senders count as new accounts for the pairing queue (they share one slot)."""
    return lambda sender_id: section.is_new_account(sender_id, now=now)


class PairingDesk:
    """Deciding pairing requests: the same for ``switchboard pairing``, ``/pair`` in an
    admin's chat and the control center. Every decision is audited with who made it."""

    def __init__(self, pairings: Pairings, audit: AuditLog, outbox: Outbox) -> None:
        self._pairings = pairings
        self._audit = audit
        self._outbox = outbox  # an approved person is welcomed

    @classmethod
    def of(cls, store: Store) -> PairingDesk:
        return cls(store.pairings, store.audit, store.outbox)

    async def decide(
        self, code: str, *, approve: bool, by: str, channel: str | None = None
    ) -> PairingRequest | None:
        """Approve (with a welcome) or deny the pending request ``code`` (of ``channel``,
        when given); ``None`` when there is no such request."""
        request = await self._pairings.decide(
            code, "approved" if approve else "denied", channel=channel
        )
        if request is None:
            return None
        await self._audit.record(
            "pairing-approved" if approve else "pairing-denied",
            channel=request.channel,
            sender_id=request.sender_id,
            code=request.code,
            by=by,
        )
        if approve:
            welcome = OutboundMessage(
                channel=request.channel,
                chat_id=request.chat_id,
                text=WELCOME,
                kind=OutboundKind.NOTICE,
                idempotency_key=f"pairing-approved:{request.code}",
            )
            await self._outbox.enqueue([welcome])
        return request

    async def revoke(self, channel: str, sender_id: str, *, by: str) -> bool:
        revoked = await self._pairings.revoke(channel, sender_id)
        if revoked:
            await self._audit.record("pairing-revoked", channel=channel, sender_id=sender_id, by=by)
        return revoked

    async def clear(self, *, by: str, channel: str | None = None) -> int:
        """Deny every open request (of ``channel``, when given); how many there were."""
        cleared = await self._pairings.clear(channel=channel)
        for request in cleared:
            await self._audit.record(
                "pairing-cleared",
                channel=request.channel,
                sender_id=request.sender_id,
                code=request.code,
                by=by,
            )
        return len(cleared)

    async def listing_text(self, *, channel: str | None = None) -> str:
        requests = await self._pairings.listing(channel=channel)
        if not requests:
            return "No pairing requests and no paired users."
        return "\n".join(describe(r) for r in requests)


def describe(request: PairingRequest, *, now: float | None = None) -> str:
    """One line of ``switchboard pairing list`` and ``/pair list``; the name the stranger
    chose is shown escaped (:func:`shown_name`): it is theirs to write anything into."""
    now = time.time() if now is None else now
    name = f" ({shown_name(request.sender_name)})" if request.sender_name else ""
    if request.state == "pending":
        minutes = max(0, int((request.expires_at - now) // 60))
        return f"{request.code}  {request.channel} user {request.sender_id}{name}  pending, {minutes} min left"
    return f"{request.code}  {request.channel} user {request.sender_id}{name}  {request.state}"
