"""Who a turn acts for: decided by the runtime from platform ids, read by the agent's policy."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.messages import ChatType


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
