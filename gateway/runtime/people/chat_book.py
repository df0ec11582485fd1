"""The chats the bot knows, by name, and where each person has had it send.

"Post this in #general on Slack" needs the id of #general: the ``chats`` tool asks this book,
which asks each configured channel that can list its chats (Slack's channel list, Discord's
servers: :class:`gateway.core.channel.SupportsDirectory`) and adds the groups learned from
the messages that came from them (a Telegram group's title; :mod:`gateway.runtime.intake.access`).
A channel that cannot be asked now is named in a note, never an error for the others.

A person's first send to a chat is confirmed with them first (the ``message`` tool): the
book remembers the question (key-value store, :data:`PROPOSAL_SECONDS`) and, once a later
turn of theirs repeats the send, that the chat is one they use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping

from gateway.core.channel import Channel, SupportsDirectory
from gateway.core.clock import Clock
from gateway.core.messages import ChatRef
from gateway.core.services import KnownChat
from gateway.store import KeyValue, People

log = logging.getLogger(__name__)

PROPOSAL_SECONDS = 3_600
LIST_TIMEOUT = 10.0  # seconds one platform may take to list its chats


class ChatBook:
    """The gateway's :class:`gateway.core.services.ChatService`."""

    def __init__(
        self,
        kv: KeyValue,
        people: People,
        channels: Mapping[str, Channel],
        *,
        chat_channels: Collection[str],
        clock: Clock,
    ) -> None:
        self._kv = kv
        self._people = people
        self._channels = channels  # the gateway's own dict: channels added later count too
        self._chat_channels = chat_channels  # the platforms with chats (not programs)
        self._clock = clock

    async def known_chats(self, channel: str | None = None) -> tuple[list[KnownChat], list[str]]:
        names = [
            n
            for n in self._channels
            if n in self._chat_channels and (channel is None or n == channel)
        ]
        found: dict[tuple[str, str], KnownChat] = {
            (c.channel, c.chat_id): c
            for c in await self._people.known_chats(channel)
            if c.channel in names
        }
        notes: list[str] = []
        for name in names:
            adapter = self._channels[name]
            if not isinstance(adapter, SupportsDirectory):
                continue
            try:
                async with asyncio.timeout(LIST_TIMEOUT):
                    entries = await adapter.directory()
            except Exception as exc:  # one platform down never hides the others' chats
                log.info("%s: could not list chats: %s", name, exc)
                notes.append(f"{name}: could not list its chats now ({type(exc).__name__})")
                continue
            for entry in entries:
                found[(name, entry.chat_id)] = KnownChat(
                    name, entry.chat_id, entry.name, entry.kind
                )
        return sorted(found.values(), key=lambda c: (c.channel, c.name.lower())), notes

    async def has_sent_to(self, person: str, chat: ChatRef) -> bool:
        return await self._people.has_sent_to(person, chat.channel, chat.chat_id)

    async def propose_send(self, person: str, chat: ChatRef, turn_id: str) -> None:
        proposal = {"turn": turn_id, "at": self._clock.now().timestamp()}
        await self._kv.set(_key(person, chat), proposal)

    async def confirmed_send(self, person: str, chat: ChatRef, turn_id: str) -> bool:
        proposal = await self._kv.get(_key(person, chat))
        if not isinstance(proposal, dict) or proposal.get("turn") == turn_id:
            return False
        return self._clock.now().timestamp() - float(proposal.get("at", 0)) <= PROPOSAL_SECONDS

    async def sent_to(self, person: str, chat: ChatRef) -> None:
        await self._people.sent_to(person, chat.channel, chat.chat_id)
        await self._kv.set(_key(person, chat), None)


def _key(person: str, chat: ChatRef) -> str:
    return f"send-proposal:{person}:{chat.channel}:{chat.chat_id}"
