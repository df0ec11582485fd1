"""Deciding pairing requests, shared by the CLI (:mod:`gateway.cli.admin`) and the /pair
command of admin chats."""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.config.channels import ChannelSection
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.store import PairingRequest, Store

WELCOME = "You're approved - welcome! Just write to me like you would to a colleague."


def young_accounts(section: ChannelSection, *, now: float) -> Callable[[str], bool]:
    """Which senders count as new accounts for the pairing queue (they share one slot)."""
    return lambda sender_id: section.is_new_account(sender_id, now=now)


async def approve(
    store: Store, code: str, *, by: str, channel: str | None = None
) -> PairingRequest | None:
    request = await store.pairings.decide(code, "approved", channel=channel)
    if request is None:
        return None
    await store.audit.record(
        "pairing-approved",
        channel=request.channel,
        sender_id=request.sender_id,
        code=request.code,
        by=by,
    )
    welcome = OutboundMessage(
        channel=request.channel,
        chat_id=request.chat_id,
        text=WELCOME,
        kind=OutboundKind.NOTICE,
        idempotency_key=f"pairing-approved:{request.code}",
    )
    await store.outbox.enqueue([welcome])
    return request


async def deny(
    store: Store, code: str, *, by: str, channel: str | None = None
) -> PairingRequest | None:
    request = await store.pairings.decide(code, "denied", channel=channel)
    if request is not None:
        await store.audit.record(
            "pairing-denied",
            channel=request.channel,
            sender_id=request.sender_id,
            code=request.code,
            by=by,
        )
    return request


async def revoke(store: Store, channel: str, sender_id: str, *, by: str) -> bool:
    revoked = await store.pairings.revoke(channel, sender_id)
    if revoked:
        await store.audit.record("pairing-revoked", channel=channel, sender_id=sender_id, by=by)
    return revoked


def describe(request: PairingRequest, *, now: float | None = None) -> str:
    now = time.time() if now is None else now
    name = f" ({request.sender_name})" if request.sender_name else ""
    if request.state == "pending":
        minutes = max(0, int((request.expires_at - now) // 60))
        return f"{request.code}  {request.channel} user {request.sender_id}{name}  pending, {minutes} min left"
    return f"{request.code}  {request.channel} user {request.sender_id}{name}  {request.state}"


async def clear(store: Store, *, by: str, channel: str | None = None) -> int:
    """Deny every open request (of ``channel``, when given); how many there were."""
    cleared = await store.pairings.clear(channel=channel)
    for request in cleared:
        await store.audit.record(
            "pairing-cleared",
            channel=request.channel,
            sender_id=request.sender_id,
            code=request.code,
            by=by,
        )
    return len(cleared)


async def listing_text(store: Store, *, channel: str | None = None) -> str:
    requests = await store.pairings.listing(channel=channel)
    if not requests:
        return "No pairing requests and no paired users."
    return "\n".join(describe(r) for r in requests)
