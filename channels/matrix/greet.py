"""``switchboard onboard --channel matrix``'s test message: a new direct room with the person
(unencrypted, so the bot can read the answer), holding one line."""

from __future__ import annotations

from nio import AsyncClient, AsyncClientConfig, RoomCreateResponse, RoomSendResponse
from nio.api import RoomPreset

from channels.matrix.settings import MatrixSettings
from gateway.core.errors import ChannelPermanentError


async def greet(settings: MatrixSettings, user_id: str, text: str) -> str:
    """Invite ``user_id`` to a new direct room and say ``text``; returns the room id."""
    assert settings.homeserver and settings.user_id and settings.access_token
    config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, request_timeout=20)
    client = AsyncClient(settings.homeserver.rstrip("/"), settings.user_id, config=config)
    client.access_token = settings.access_token.get_secret_value().strip()
    try:
        room = await client.room_create(
            is_direct=True, invite=[user_id], preset=RoomPreset.trusted_private_chat
        )
        if not isinstance(room, RoomCreateResponse):
            raise ChannelPermanentError(f"could not create a room: {room}")
        sent = await client.room_send(
            room.room_id, "m.room.message", {"msgtype": "m.notice", "body": text}
        )
        if not isinstance(sent, RoomSendResponse):
            raise ChannelPermanentError(f"could not write to the new room: {sent}")
        return str(room.room_id)
    finally:
        await client.close()
