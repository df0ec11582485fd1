"""The control center's people and access: who may talk to the assistant and how, by name.

Everyone the configuration lists (owners, admins, ``allow_from``), everyone paired, and
everyone who wrote: their role (as the access gate decides it, from the channel's
settings), how they got in, their channels, their time zone and what they used in the last
30 days. Pending pairing requests come first; they are approved or denied through the same
code as ``switchboard pairing approve`` (gateway/runtime/intake/pairing.py).

A person with several addresses (config's ``[people.<name>] ids``, or linked by ``/link``)
is one row with all of them, under the role their person holds and with what they used on
each (under their key, and on each address before it was linked); the owner links and unlinks
addresses here through the code ``/link`` and ``/unlink`` run
(gateway/runtime/people/linking.py), and confirms a link that waits for their word.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.core.principal import Role
from gateway.core.text.textutil import shown_name
from gateway.web.control.names import Names

if TYPE_CHECKING:
    from gateway.config.channels import ChannelSection
    from gateway.config.people import PersonSettings
    from gateway.web.view import GatewayView, LinkedPerson

USAGE_DAYS = 30


@dataclass(slots=True)
class _Row:
    channel: str
    sender_id: str
    how: list[str] = field(default_factory=list)  # "owners", "allow_from", "paired", "wrote"
    chats: list[tuple[str, str]] = field(default_factory=list)
    zone: str | None = None
    person: LinkedPerson | None = None  # the person they are one address of, if linked

    @property
    def address(self) -> str:
        return f"{self.channel}:{self.sender_id}"

    @property
    def key(self) -> str:
        """Whose settings and usage these are: their person's key."""
        return self.address if self.person is None else self.person.key

    def role_in(self, sections: Mapping[str, ChannelSection]) -> Role:
        """The role their person holds, else their channel's settings give them."""
        if self.person is not None:
            return Role(self.person.role)
        own = sections.get(self.channel)
        return own.role_of(self.sender_id) if own is not None else Role.MEMBER

    def others(self) -> list[str]:
        """Their person's other addresses."""
        addresses = () if self.person is None else self.person.addresses
        return [a for a in addresses if a != self.address]


async def listing(gateway: GatewayView) -> dict[str, Any]:
    settings = gateway.settings
    store = gateway.store
    sections = {n: s for n, s in settings.channel_sections().items() if s.enabled}
    rows: dict[str, _Row] = {}

    def row(channel: str, sender_id: str) -> _Row:
        person = f"{channel}:{sender_id}"
        found = rows.get(person)
        if found is None:
            found = rows[person] = _Row(channel, sender_id)
        return found

    for channel, section in sections.items():
        for listed in ("owners", "admins", "allow_from"):
            for sender_id in getattr(section, listed):
                if sender_id != "*":
                    row(channel, sender_id).how.append(listed)
    requests = await store.pairings.listing()
    asked_as: dict[str, str] = {}  # the name a paired person asked under
    for request in requests:
        if request.state == "approved":
            row(request.channel, request.sender_id).how.append("paired")
            asked_as[f"{request.channel}:{request.sender_id}"] = request.sender_name
    for known in await store.people.listing():
        channel, _, sender_id = known.person.partition(":")
        if channel not in sections:
            continue  # the owner at the machine, other programs: not people to manage
        found = row(channel, sender_id)
        found.chats.extend(known.chats)
        found.zone = known.timezone
        if not found.how:
            found.how.append("wrote")
    linked = await gateway.linked_people()
    _mark_linked(linked, sections, row)
    names = await Names.load(store)
    used = {u.key: u for u in await store.usage.since(USAGE_DAYS * 86_400, by="person")}
    people: list[tuple[int, str, dict[str, Any]]] = []
    for person, found in sorted(_one_row_each(rows).items()):
        role = found.role_in(sections)
        configured = _configured(settings.people, found.key)
        zone, zone_from = found.zone, "set by asking"
        if configured is not None and configured.timezone:
            zone, zone_from = configured.timezone, "[people] config"
        if zone is None:
            zone, zone_from = settings.timezone, "the default (user.timezone)"
        # their key's, and what each address used before it was linked
        usage = [used[a] for a in dict.fromkeys([person, *found.others()]) if a in used]
        name = shown_name(names.known(person) or asked_as.get(person) or names.person(person))
        people.append(
            (
                list(Role).index(role),
                name.lower(),
                {
                    "person": person,
                    "name": name,
                    "channel": found.channel,
                    "sender_id": found.sender_id,
                    "role": role.value,
                    "how": found.how,
                    "paired": "paired" in found.how,
                    "chats": sorted({names.session(f"{c}:{i}").title for c, i in found.chats}),
                    "linked_with": found.others(),
                    "timezone": zone,
                    "timezone_from": zone_from,
                    "turns": sum(u.turns for u in usage),
                    "tokens": sum(u.input_tokens + u.output_tokens for u in usage),
                },
            )
        )
    people.sort(key=lambda p: p[:2])
    return {
        "pending": [
            {
                "code": r.code,
                "channel": r.channel,
                "sender_id": r.sender_id,
                "sender_name": shown_name(r.sender_name),
                "created_at": r.created_at,
                "expires_at": r.expires_at,
            }
            for r in requests
            if r.state == "pending"
        ],
        "people": [p for _, _, p in people],
        "linked": [
            {
                "person": one.key,
                "name": one.name or names.known(one.key) or names.person(one.key),
                "addresses": list(one.addresses),
                "role": one.role,
                "one_conversation": one.one_conversation,
                "listed": list(one.listed),
            }
            for one in linked
        ],
        "waiting_links": [
            {
                "code": w.code,
                "asked_by": w.address,
                "sent_by": w.used_by,
                "expires_at": w.expires_at,
            }
            for w in await store.links.waiting(now=time.time())
        ],
        "usage_days": USAGE_DAYS,
    }


def _mark_linked(
    linked: list[LinkedPerson],
    sections: Mapping[str, ChannelSection],
    row: Callable[[str, str], _Row],
) -> None:
    """Every address of a linked person is shown, as one of theirs."""
    for person in linked:
        for address in person.addresses:
            channel, _, sender_id = address.partition(":")
            if channel in sections:
                found = row(channel, sender_id)
                found.person = person
                found.how = found.how or ["linked"]


def _one_row_each(rows: Mapping[str, _Row]) -> dict[str, _Row]:
    """One row a person: a linked person's addresses are one, under the first of theirs
    shown (their key, where its channel is on), with how each got in and their chats."""
    shown: dict[str, _Row] = {}
    for address, found in rows.items():
        person = found.person
        if person is None:
            shown[address] = found
            continue
        mine = [rows[a] for a in person.addresses if a in rows]
        if mine[0] is not found:
            continue  # shown in the row of the first
        one = shown[address] = _Row(found.channel, found.sender_id, person=person)
        for each in mine:
            one.how = list(dict.fromkeys([*one.how, *each.how]))
            one.chats.extend(each.chats)
            one.zone = one.zone or each.zone
    return shown


def _configured(people: Mapping[str, PersonSettings], key: str) -> PersonSettings | None:
    """The ``[people]`` entry of the person whose key is ``key``: keyed by it, or listing
    it first in ``ids``."""
    if key in people:
        return people[key]
    return next((p for p in people.values() if p.ids and p.ids[0] == key), None)
