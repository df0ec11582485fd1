"""Who is talking, and what they may do: resolved from platform identity, never from text."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.messages import ChatType, InboundMessage
from gateway.settings_channels import ChannelSection


@dataclass(frozen=True, slots=True)
class Principal:
    """The person a turn acts for."""

    channel: str
    sender_id: str
    sender_name: str = ""
    role: str = "member"  # "owner" | "admin" | "member"
    chat_type: ChatType = ChatType.DM

    @property
    def is_admin(self) -> bool:
        return self.role in ("owner", "admin")


def principal_for(msg: InboundMessage, section: ChannelSection | None) -> Principal:
    """The principal of an inbound message; admins are listed by immutable id in config."""
    role = "member"
    if section is not None and msg.sender_id in section.admins:
        role = "admin"
    elif msg.channel == "terminal":
        role = "owner"  # whoever runs `switchboard chat` owns the machine
    return Principal(msg.channel, msg.sender_id, msg.sender_name, role, msg.chat_type)
