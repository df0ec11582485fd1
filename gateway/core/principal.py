"""Who a turn acts for: decided by the runtime from platform ids, read by the agent's policy."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gateway.core.messages import ChatType


class Role(enum.StrEnum):
    """What a person may do, from the ids listed in a channel's settings."""

    OWNER = "owner"  # runs the gateway: every tool, every chat
    ADMIN = "admin"  # trusted: most tools; approvals the owner allows
    MEMBER = "member"  # allowed to talk: the safe tools, their own memory

    @property
    def privileged(self) -> bool:
        return self is not Role.MEMBER


@dataclass(frozen=True, slots=True)
class Principal:
    """The person a turn acts for."""

    channel: str
    sender_id: str
    sender_name: str = ""
    role: Role = Role.MEMBER
    chat_type: ChatType = ChatType.DM
    # The key of the person this address is one of (gateway.runtime.people.directory), when
    # they have others: their usage, memory, zone and allowance are kept under it.
    person_key: str = ""

    @property
    def is_admin(self) -> bool:
        return self.role.privileged

    @property
    def is_owner(self) -> bool:
        return self.role is Role.OWNER

    @property
    def address(self) -> str:
        """The address the turn came from: ``channel:sender id``."""
        return f"{self.channel}:{self.sender_id}"

    @property
    def person(self) -> str:
        """Whose allowance, usage, memory and zone a turn is: the person's key, which is
        their address unless they have several (then the first one's)."""
        return self.person_key or self.address

    def record(self) -> dict[str, str]:
        """As work done for this person later stores it (a job's, a task's, a conversation's
        owner); :meth:`from_record` reads it back."""
        return {k: str(v) for k, v in asdict(self).items()}

    @classmethod
    def from_record(cls, owner: Mapping[str, Any]) -> Principal:
        return cls(
            str(owner.get("channel", "")),
            str(owner.get("sender_id", "")),
            str(owner.get("sender_name", "")),
            Role(owner.get("role", Role.MEMBER)),
            ChatType(owner.get("chat_type", "dm")),
            str(owner.get("person_key", "")),
        )
