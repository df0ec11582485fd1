"""End-to-end encrypted rooms: the bot says once why it cannot take part, then leaves.

Switchboard does not read encrypted rooms (docs/channels.md#matrix). A room is encrypted
once its state holds ``m.room.encryption``: already when the bot is invited, or turned on
later. The syncs say so (matrix-nio keeps each room's state from them); a room they have
not said it of yet is asked about once per run, because a room that stayed quiet while the
gateway was down has no state in them (an earlier version stayed in encrypted rooms).

Nothing of an encrypted room is journaled: its whole part of a sync is skipped, so a
plaintext message next to the encryption event (after it, or just before it) gets no turn
either; the bot is leaving, and an answer could not be delivered. The notice is plaintext
(the bot holds no keys) and is keyed by the event that brought the bot into the encrypted
room in that sync (its own join, else the encryption turned on): a sync handled again says
nothing twice, while a later invitation into the same room is told again.
"""

from __future__ import annotations

import logging
from typing import Any

from nio import AsyncClient, RoomGetStateEventResponse, RoomLeaveError
from nio.responses import RoomInfo

from channels.matrix.convert import CHANNEL
from channels.matrix.sender import Sender
from gateway.core.messages import OutboundKind, OutboundMessage

log = logging.getLogger(__name__)

ENCRYPTED_REFUSAL = (
    "This room is end-to-end encrypted, and Switchboard cannot read encrypted messages, "
    "so I am leaving it. Talk to me in a room without encryption (create a room, turn "
    "encryption off, and invite me)."
)
ENCRYPTION = "m.room.encryption"


class EncryptedRooms:
    def __init__(self, client: AsyncClient, sender: Sender) -> None:
        self._client = client
        self._sender = sender
        self._plain: set[str] = set()  # asked this run: not encrypted (changes come by sync)
        self._told: set[str] = set()  # told why, not left yet

    async def encrypted(self, room_id: str) -> bool:
        """Whether the room is end-to-end encrypted, as of the sync just received (or now).
        Raises when the homeserver cannot say: the sync is then handled again."""
        room = self._client.rooms.get(room_id)
        if room is not None and room.encrypted:
            return True
        if room_id in self._plain:
            return False
        answer = await self._client.room_get_state_event(room_id, ENCRYPTION)
        if isinstance(answer, RoomGetStateEventResponse):
            return True
        if answer.status_code != "M_NOT_FOUND":
            raise ConnectionError(f"cannot read whether {room_id} is encrypted: {answer}")
        self._plain.add(room_id)
        return False

    async def refuse(self, room_id: str, joined: RoomInfo) -> None:
        """Say why (once), then leave. A refused leave is logged and tried again with the
        room's next sync; a network failure raises (the sync is handled again)."""
        if room_id not in self._told:
            self._told.add(room_id)
            log.warning("matrix: %s is end-to-end encrypted; saying so and leaving", room_id)
            notice = OutboundMessage(
                channel=CHANNEL,
                chat_id=room_id,
                text=ENCRYPTED_REFUSAL,
                kind=OutboundKind.NOTICE,
                idempotency_key=_notice_key(room_id, joined, self._client.user_id),
            )
            try:
                await self._sender.send(notice)
            except Exception as exc:  # the notice is a courtesy; leaving matters
                log.warning("matrix: could not say so in %s: %s", room_id, exc)
        answer = await self._client.room_leave(room_id)
        if isinstance(answer, RoomLeaveError):
            log.warning("matrix: could not leave %s (%s); trying again later", room_id, answer)
            return
        self._told.discard(room_id)
        log.info("matrix: left the encrypted room %s", room_id)


def _notice_key(room_id: str, joined: RoomInfo, user_id: str) -> str:
    """The notice's idempotency key: the latest of the bot's own joins in this sync, else the
    latest encryption event, else the room."""
    events: list[dict[str, Any]] = [
        getattr(event, "source", None) or {} for event in (*joined.state, *joined.timeline.events)
    ]

    def own_join(event: dict[str, Any]) -> bool:
        content = event.get("content") or {}
        return (
            event.get("type") == "m.room.member"
            and event.get("state_key") == user_id
            and content.get("membership") == "join"
        )

    def encryption(event: dict[str, Any]) -> bool:
        return event.get("type") == ENCRYPTION

    for wanted in (own_join, encryption):
        found = [str(e["event_id"]) for e in events if wanted(e) and e.get("event_id")]
        if found:
            return f"e2ee:{found[-1]}"
    return f"e2ee:{room_id}"
