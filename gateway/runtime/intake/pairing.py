"""Deciding pairing requests, shared by the CLI (:mod:`gateway.cli.admin`) and the /pair
command of admin chats."""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.config.channels import ChannelSection, DiscordSettings
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.store import PairingRequest, Store

WELCOME = "You're approved - welcome! Just write to me like you would to a colleague."
DISCORD_EPOCH_MS = 1_420_070_400_000  # 2015-01-01, where Discord snowflakes count from


def account_created_at(channel: str, sender_id: str) -> float | None:
    """When the sender's platform account was made, where its id tells (a Discord user id
    is a snowflake: milliseconds since 2015 in its top bits); ``None`` elsewhere."""
    if channel != "discord" or not sender_id.isdigit():
        return None
    return ((int(sender_id) >> 22) + DISCORD_EPOCH_MS) / 1000


def young_accounts(channel: str, section: ChannelSection, *, now: float) -> Callable[[str], bool]:
    """Which senders count as new accounts for the pairing queue (they share one slot)."""
    if not isinstance(section, DiscordSettings) or not section.pairing_min_account_age_days:
        return lambda sender_id: False
    youngest = now - section.pairing_min_account_age_days * 86_400

    def young(sender_id: str) -> bool:
        created = account_created_at(channel, sender_id)
        return created is not None and created > youngest

    return young


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
