"""The owner's home chat: where check-ins go when ``heartbeat.target`` names none.

It is the owner's last direct chat, recorded by the commit of a turn there. A local chat
(the terminal, a web-chat tab) is only the home while the owner has written in no chat that
reaches them when they are away: a check-in sent to a closed terminal or a forgotten browser
tab would reach nobody.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.core.addressing import LOCAL_CHANNELS
from gateway.core.messages import ChatRef, ChatType
from gateway.store.engine.sql import Connection
from gateway.store.ledger import KeyValue

KEY = "last_chat"  # the kv row (its name kept from before it was typed)


@dataclass(frozen=True, slots=True)
class HomeChat:
    chat: ChatRef
    chat_type: ChatType = ChatType.DM
    person: str | None = None  # the owner who wrote there ("channel:sender id"): whose zone

    @property
    def local(self) -> bool:
        return self.chat.channel in LOCAL_CHANNELS

    @property
    def label(self) -> str:
        return f"{self.chat.channel}:{self.chat.chat_id}"

    def to_dict(self) -> dict[str, str | None]:
        return {
            "channel": self.chat.channel,
            "chat_id": self.chat.chat_id,
            "thread_id": self.chat.thread_id,
            "chat_type": self.chat_type.value,
            "person": self.person,
        }

    @classmethod
    def from_dict(cls, value: Any) -> HomeChat | None:
        if not isinstance(value, dict) or not value.get("channel") or not value.get("chat_id"):
            return None
        chat = ChatRef(str(value["channel"]), str(value["chat_id"]), value.get("thread_id"))
        person = value.get("person")
        return cls(chat, ChatType(value.get("chat_type") or "dm"), str(person) if person else None)


class HomeChats:
    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    async def get(self) -> HomeChat | None:
        return HomeChat.from_dict(await self._kv.get(KEY))

    def set_statement(self, conn: Connection, home: HomeChat) -> None:
        self._kv.set_statement(conn, KEY, home.to_dict())


def replaces(candidate: HomeChat, current: HomeChat | None) -> bool:
    """Whether the owner's chat ``candidate`` becomes the home: any chat replaces a missing
    or local home; a local chat never replaces one that reaches the owner when away."""
    return current is None or current.local or not candidate.local
