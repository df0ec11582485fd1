"""The control center's conversations: every session on every channel, one transcript, and
search across all of them, as plain JSON data the page renders with ``textContent`` only.

A transcript shows what the history holds: the people's messages, the answers, every tool
call with its arguments and every tool result (cut for the page), each turn linked to its
trace (``/trace/<turn id>``); a ``/new`` shows as a line where a fresh conversation began.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gateway.config.channels import address_role
from gateway.core.addressing import INTERNAL_CHANNELS, PROGRAM_CHANNELS, agent_of
from gateway.core.principal import Role
from gateway.store.history import MessageRole, ShownMessage, searchable, without_guidance
from gateway.web.control.names import Names

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

LISTED = 300  # conversations listed, most recently active first
SEARCHED = 5_000  # sessions a search covers, most recently active first
SHOWN = 400  # messages of one transcript, newest
MAX_TEXT = 20_000  # characters of one message shown
MAX_RESULT = 4_000  # characters of one tool result shown
PREVIEW = 160
_MARKUP = re.compile(r"```\w*|\*\*|__|`")  # markdown a one-line preview leaves out


def cut(text: str, limit: int) -> str:
    return (
        text
        if len(text) <= limit
        else f"{text[:limit]}\n[... {len(text) - limit:,} more characters]"
    )


async def listing(gateway: GatewayView) -> list[dict[str, Any]]:
    store = gateway.store
    names = await Names.load(store)
    waiting: dict[str, int] = {}
    for request in await store.approval_requests.pending():
        waiting[request.session_key] = waiting.get(request.session_key, 0) + 1
    rows = []
    for summary in await store.history.sessions(limit=LISTED):
        title = names.session(summary.session_key)
        activity = gateway.session_activity(summary.session_key)
        rows.append(
            {
                "session": summary.session_key,
                "title": title.title,
                "kind": title.kind,
                "channel": title.channel,
                "agent": title.agent,
                "last_active": summary.last_active,
                "messages": summary.messages,
                "last_role": summary.last_role,
                "last_text": " ".join(_MARKUP.sub("", summary.last_text).split())[:PREVIEW],
                "last_at": summary.last_at,
                "state": activity.state,
                "queued": activity.queued,
                "approvals": waiting.get(summary.session_key, 0),
            }
        )
    return rows


class Speakers:
    """Who said each message, as the owner reads it: "You" for the owner's own words (on any
    of their addresses), the name of anyone else, the agent's name for its answers."""

    def __init__(self, gateway: GatewayView, names: Names, owners: frozenset[str]) -> None:
        self._settings = gateway.settings
        self._sections = gateway.settings.channel_sections()
        self._names = names
        self._owners = owners  # the addresses of linked people who are owners

    @classmethod
    async def load(cls, gateway: GatewayView, names: Names) -> Speakers:
        linked = await gateway.linked_people()
        owners = {a for p in linked if p.role == Role.OWNER.value for a in p.addresses}
        return cls(gateway, names, frozenset(owners))

    def of(self, session_key: str, role: MessageRole, sender: str) -> str:
        """``sender``: who wrote a person's message ("channel:sender id"; "" for messages
        stored before it was recorded, and the prompts of scheduled work)."""
        if role == "assistant":
            return self._settings.agent_name(agent_of(session_key))
        if role == "tool":
            return "Tool result"
        if role == "system":
            return "System"
        title = self._names.session(session_key)
        if not sender:  # the session says who it can be, or nobody knows
            if title.kind == "local":
                return "You"
            if title.kind in ("job", "heartbeat", "program", "internal"):
                return title.title
            people = self._names.members(session_key)
            return self._person(people[0]) if len(people) == 1 else "Someone"
        channel = sender.partition(":")[0]
        if channel in PROGRAM_CHANNELS or channel in INTERNAL_CHANNELS:
            return title.title
        return self._person(sender)

    def _person(self, address: str) -> str:
        if address in self._owners or address_role(self._sections, address) is Role.OWNER:
            return "You"
        return self._names.known(address) or self._names.person(address)


async def transcript(gateway: GatewayView, session_key: str) -> dict[str, Any] | None:
    """The session's transcript; ``None`` for one that never existed (a mistyped link)."""
    store = gateway.store
    names = await Names.load(store)
    messages = await store.history.transcript(session_key, limit=SHOWN)
    activity = gateway.session_activity(session_key)
    unused = not messages and activity.state == "idle" and not activity.queued
    if unused and not await store.history.known(session_key):
        return None
    speakers = await Speakers.load(gateway, names)
    return {
        "session": session_key,
        "title": names.session(session_key).title,
        "state": activity.state,
        "queued": activity.queued,
        "messages": [
            shown(m) | {"who": speakers.of(session_key, m.role, str(m.body.get("sender") or ""))}
            for m in messages
        ],
    }


def shown(message: ShownMessage) -> dict[str, Any]:
    body = message.body
    text = searchable(body.get("content")) or ""
    if message.role == "user":  # the person's words, not the guidance kept after them
        text = without_guidance(text)
    entry: dict[str, Any] = {
        "id": message.id,
        "role": message.role,
        "at": message.at,
        "turn": message.turn_id,
        "generation": message.generation,
        "running": message.running,
        "text": cut(text, MAX_RESULT if message.role == "tool" else MAX_TEXT),
    }
    if message.role == "tool":
        entry["tool"] = body.get("name") or "tool"
        entry["error"] = bool(body.get("is_error"))
    calls = body.get("tool_calls") or ()
    if calls:
        entry["calls"] = [
            {
                "name": str(c.get("name", "?")),
                "arguments": cut(str(c.get("arguments", "")), MAX_TEXT),
            }
            for c in calls
        ]
    files = body.get("files") or ()
    if files:
        entry["files"] = [str(f).rsplit("/", 1)[-1] for f in files]
    return entry


async def search(gateway: GatewayView, query: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """Messages of every conversation that hold the words of ``query``, best first."""
    store = gateway.store
    keys = await store.history.session_keys(limit=SEARCHED)
    hits = await store.recall.keyword(keys, query, limit=limit)
    found = await store.recall.messages([h.message_id for h in hits])
    names = await Names.load(store)
    speakers = await Speakers.load(gateway, names)
    results = []
    for hit in hits:
        said = found.get(hit.message_id)
        if said is None:
            continue
        results.append(
            {
                "session": said.session_key,
                "title": names.session(said.session_key).title,
                "role": said.role,
                "who": speakers.of(said.session_key, said.role, said.sender),
                "at": said.at,
                # the words around the matches, each piece marked when it is one: the page
                # draws them as text, a match in <mark>
                "snippet": [{"text": text, "hit": match} for text, match in hit.pieces()],
            }
        )
    return results
