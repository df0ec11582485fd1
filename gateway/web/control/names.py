"""People and conversations by name, for the control center: never a bare platform id
where a name is known.

A person's name is the one they last wrote under (recorded at the access gate); a group's
is its title; a direct chat is named after the people who write in it. Sessions of the
gateway's own making (scheduled jobs, the heartbeat, other programs, agents talking) are
named for what they are.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from gateway.core.addressing import (
    AGENT_CHANNEL,
    API_CHANNEL,
    DEFAULT_AGENT,
    HOOK_CHANNEL,
    PERSON_CHANNEL,
    SYSTEM_CHANNEL,
    TASK_CHANNEL,
    agent_of,
    chat_of,
)
from gateway.store import Store

ChatKind = Literal["direct", "group", "local", "job", "heartbeat", "program", "internal"]

LOCAL_TITLES = {"webchat": "You, in the web chat", "terminal": "You, in the terminal"}


@dataclass(frozen=True, slots=True)
class Title:
    title: str  # "Ann", "Family (group)", "Scheduled job 3fa2c1d0"
    kind: ChatKind
    channel: str  # the platform (or the internal channel) the session belongs to
    agent: str


class Names:
    """A snapshot of who and what is known by name (load it once per request)."""

    def __init__(
        self,
        people: dict[str, str],
        chats: dict[tuple[str, str], str],
        members: dict[tuple[str, str], list[str]],
    ) -> None:
        self._people = people  # "channel:sender id" -> name
        self._chats = chats  # (channel, chat id) -> a group's title
        self._members = members  # (channel, chat id) -> the people who wrote there

    @classmethod
    async def load(cls, store: Store) -> Names:
        people: dict[str, str] = {}
        members: defaultdict[tuple[str, str], list[str]] = defaultdict(list)
        for person in await store.people.listing():
            if person.name:
                people[person.person] = person.name
            for chat in person.chats:
                members[chat].append(person.person)
        chats = {(c.channel, c.chat_id): c.name for c in await store.people.known_chats()}
        return cls(people, chats, dict(members))

    def known(self, person: str) -> str | None:
        """The name on record for ``person``, if any."""
        return self._people.get(person)

    def members(self, session_key: str) -> list[str]:
        """The people who wrote in the session's chat (``channel:sender id`` each)."""
        channel, _, rest = chat_of(session_key).partition(":")
        return self._members.get((channel, rest.split(":", 1)[0]), [])

    def person(self, person: str) -> str:
        """``telegram:42`` -> ``Ann`` (or the id, when no name is on record)."""
        if not person:
            return "nobody (the gateway's own work)"
        channel, _, sender = person.partition(":")
        if channel in LOCAL_TITLES:
            return "You (the owner)"
        return self._people.get(person) or f"{channel} user {sender}"

    def session(self, session_key: str) -> Title:
        agent = agent_of(session_key)
        chat = chat_of(session_key)
        channel, _, rest = chat.partition(":")
        chat_id = rest.split(":", 1)[0]
        suffix = "" if agent == DEFAULT_AGENT else f" ({agent})"

        def titled(title: str, kind: ChatKind) -> Title:
            return Title(title + suffix, kind, channel, agent)

        if channel in LOCAL_TITLES:
            return titled(LOCAL_TITLES[channel], "local")
        if channel == PERSON_CHANNEL:  # one person's direct chats on every channel
            return titled(f"{self.person(rest)} (every channel)", "direct")
        if channel == "cron":
            return titled(f"Scheduled job {chat_id}", "job")
        if channel == "heartbeat":
            return titled("Heartbeat check-ins", "heartbeat")
        if channel == API_CHANNEL:
            return titled(f"API token {chat_id}", "program")
        if channel == HOOK_CHANNEL:
            return titled(f"Webhook {chat_id}", "program")
        if channel in (AGENT_CHANNEL, SYSTEM_CHANNEL, TASK_CHANNEL):
            return titled(f"{channel} {chat_id}", "internal")
        group = self._chats.get((channel, chat_id))
        if group is not None:
            return titled(f"{group} ({channel} group)", "group")
        people = [self.person(p) for p in self._members.get((channel, chat_id), [])]
        if people:
            return titled(f"{', '.join(people)} ({channel})", "direct")
        return titled(f"{channel} chat {chat_id}", "direct")
