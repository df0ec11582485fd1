"""Who an address is: the one resolver from ``channel:sender id`` to a person.

A person is one record with many addresses: those config lists together (``[people.<name>]
ids``, or one ``[people."<channel>:<id>"]``), and those people linked themselves (``/link``,
the database's ``person_links``). Their *key* is one of their addresses, the first config
lists (else the one the others were linked to), so a person who gains an address keeps
what was kept under their first one: usage, memory, zone, allowance, pairing.

With ``session.scope = "person"`` a linked person's direct chats are one conversation
(``person:<key>``). A person keeps it when only one address is left (an ``/unlink``, an
address taken out of config's ``ids``): once a person has written in a shared conversation,
or an unlink left them one, it is theirs (:meth:`PeopleDirectory.keeps`), so what they said
minutes ago is not swapped for their chat's conversation from before the link.

Everything kept per person is looked up under the key (``Principal.person``): the access
gate stamps who a message is from on the message itself before it is journaled
(:class:`Identity`: the key, the role the person holds, their one conversation), so the
same message joins the same session after a restart and on every node of a cluster. The
role of a person is the highest any of their addresses has in its channel's settings: the
owner's addresses in config make the owner; a link that would raise someone's role waits
for the owner's word (gateway/runtime/people/linking.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gateway.config.channels import ChannelSection, address_role
from gateway.config.people import PersonSettings, SessionScope, configured_addresses
from gateway.core.addressing import person_conversation
from gateway.core.messages import ChatRef
from gateway.core.principal import Role
from gateway.store import KeyValue, PersonLinks

_RANK = {Role.MEMBER: 0, Role.ADMIN: 1, Role.OWNER: 2}


def highest(roles: Iterable[Role]) -> Role:
    """The role that may do the most of ``roles``."""
    return max(roles, key=_RANK.__getitem__, default=Role.MEMBER)


def owners_home(
    people: Mapping[str, PersonSettings], sections: Mapping[str, ChannelSection]
) -> str | None:
    """The ``home`` config gives the owner's person (one of whose addresses is an owner's),
    if any: where the owner's check-ins go when ``heartbeat.target`` does not say."""
    for name, person in people.items():
        addresses = configured_addresses(name, person)
        if person.home and any(address_role(sections, a) is Role.OWNER for a in addresses):
            return person.home
    return None


@dataclass(frozen=True, slots=True)
class ConfiguredPerson:
    """A person ``[people]`` lists."""

    name: str  # the [people] key
    key: str  # the person's key: their first address
    addresses: tuple[str, ...]
    settings: PersonSettings


@dataclass(frozen=True, slots=True)
class Identity:
    """One address as the gateway knows it."""

    address: str
    person: str  # the person's key (the address itself when it is theirs alone)
    addresses: tuple[str, ...]  # every address of the person, the key first
    role: Role  # the highest role any of them has
    name: str = ""  # the [people] key that lists them, if any
    one_conversation: bool = False  # their direct chats are one session across channels
    listed: tuple[str, ...] = ()  # those of their addresses config lists (not unlinkable)

    @property
    def linked(self) -> bool:
        return len(self.addresses) > 1

    @property
    def conversation(self) -> str:
        """The session their direct chats share ("" : each chat its own)."""
        return person_conversation(self.person) if self.one_conversation else ""


class PeopleDirectory:
    """Addresses to people: config's ``[people]`` and the links people made."""

    def __init__(
        self,
        people: Mapping[str, PersonSettings],
        sections: Mapping[str, ChannelSection],
        links: PersonLinks,
        kv: KeyValue,
        *,
        scope: SessionScope = "chat",
    ) -> None:
        self._sections = sections  # each channel's owners and admins
        self._links = links
        self._kv = kv  # the chat each person wrote from last
        self._scope = scope
        self._by_address: dict[str, ConfiguredPerson] = {}
        for name, person in people.items():
            addresses = configured_addresses(name, person)
            entry = ConfiguredPerson(name, addresses[0], addresses, person)
            for address in addresses:
                self._by_address[address] = entry
        self._last: dict[str, ChatRef] = {}  # last chats already recorded
        self._keeping: set[str] = set()  # people known to keep their one conversation

    # -- config ---------------------------------------------------------------------------

    def settings_of(self, person: str) -> PersonSettings | None:
        """What config says of the person whose key (or address) is ``person``."""
        entry = self._by_address.get(person)
        return None if entry is None else entry.settings

    def configured(self) -> dict[str, ConfiguredPerson]:
        """Each configured person, by their key."""
        return {e.key: e for e in self._by_address.values()}

    def by_address(self) -> dict[str, PersonSettings]:
        """Each configured person's settings under every address of theirs (a job stored
        before its owner's addresses were linked names the address it was set from)."""
        return {address: e.settings for address, e in self._by_address.items()}

    def configured_addresses(self) -> list[str]:
        """Every address config names, in config's order."""
        return list(self._by_address)

    # -- who an address is ------------------------------------------------------------------

    def role_of(self, address: str) -> Role:
        """The role ``address`` has by its own channel's settings (:func:`address_role`)."""
        return address_role(self._sections, address)

    async def identify(self, address: str) -> Identity:
        entry = self._by_address.get(address)
        if entry is None:
            stored = await self._links.person_of(address)
            entry = None if stored is None else self._by_address.get(stored)
            key = stored or address
        if entry is not None:
            key = entry.key
            roots: tuple[str, ...] = entry.addresses
        else:
            roots = (key,)
        linked = await self._links.linked_to(roots)
        addresses = tuple(dict.fromkeys([key, *roots, *linked]))
        own = None if entry is None else entry.settings.session
        one = (own or self._scope) == "person" and (len(addresses) > 1 or await self._kept(key))
        return Identity(
            address,
            key,
            addresses,
            highest(self.role_of(a) for a in addresses),
            "" if entry is None else entry.name,
            one,
            () if entry is None else entry.addresses,
        )

    # -- a person's one conversation --------------------------------------------------------

    async def _kept(self, person: str) -> bool:
        """Whether ``person`` (one address left) keeps a conversation of their own across
        chats (:meth:`keeps`)."""
        if person in self._keeping:
            return True
        if await self._kv.get(f"person-conversation:{person}") is None:
            return False
        self._keeping.add(person)
        return True

    async def keeps(self, person: str) -> None:
        """``person``'s direct chats stay one conversation (``person:<key>``) also with one
        address: they wrote in it, or an unlink left them one (read only under
        ``session.scope = "person"``)."""
        if person not in self._keeping:
            await self._kv.set(f"person-conversation:{person}", True)
            self._keeping.add(person)

    async def parted(self, person: str, leaving: Iterable[str]) -> None:
        """``leaving`` are no longer ``person``'s: a chat of theirs is not where the
        person's messages go (a direct chat on a channel the person has no other address
        on was one of theirs)."""
        left = {address.partition(":")[0] for address in leaving}
        staying = {a.partition(":")[0] for a in (await self.identify(person)).addresses}
        last = await self.reach_last(person)
        if last is not None and last.channel in left - staying:
            await self._kv.set(f"person-chat:{person}", None)
            self._last.pop(person, None)

    # -- where a person is ------------------------------------------------------------------

    async def wrote_from(self, person: str, chat: ChatRef) -> None:
        """``person`` wrote from the direct chat ``chat`` of their one conversation last
        (written when it changes); the conversation is theirs to keep."""
        if self._last.get(person) == chat:
            return
        await self.keeps(person)
        await self._kv.set(f"person-chat:{person}", {"channel": chat.channel, "chat": chat.chat_id})
        self._last[person] = chat

    async def reach_last(self, person: str) -> ChatRef | None:
        """The direct chat ``person`` wrote from last in their one conversation, if known."""
        last = await self._kv.get(f"person-chat:{person}")
        if not isinstance(last, dict):
            return None
        return ChatRef(str(last.get("channel", "")), str(last.get("chat", "")))

    async def reach(self, identity: Identity) -> ChatRef | None:
        """Where a message to a person whose chats are one conversation goes: their
        ``home`` in config, else the direct chat they wrote from last (``None``: unknown)."""
        settings = self.settings_of(identity.person)
        if settings is not None and settings.home is not None:
            channel, _, chat_id = settings.home.partition(":")
            return ChatRef(channel, chat_id)
        return await self.reach_last(identity.person)
