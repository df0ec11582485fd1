"""Revoking someone's access: one action, wherever it is asked for (``switchboard pairing
revoke``, the control center's Revoke, ``/pair revoke`` in an admin's chat).

What lets an address in is its pairing (the store) and its place in its channel's lists in
config.toml (``owners``, ``admins``, ``allow_from``, a group's ``allow_from``). A revocation
takes both away: first the lists, written as every change of the configuration is and
applied by the running gateway at once (:class:`AccessConfig`: in the gateway the settings
page's path, :func:`gateway.runtime.live.settings.change_keys`; on the command line
``config set``'s, which waits for a running gateway to apply it), then the pairing. A
change of config.toml that is refused changes nothing, the pairing included.

It is audited (``access-revoked``, besides the pairing's ``pairing-revoked`` and the
settings' ``settings_changed``) and says what it revoked and what still lets them in: a
list set where it does not write (the environment, ``.env``, a secret file), a ``*`` or an
open policy, another address of the same person, a change that waits for a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gateway.config.settings import Settings
from gateway.config.sources import describe
from gateway.config.toml.config_file import config_text
from gateway.config.toml.edit import get_key
from gateway.core.errors import ConfigFileUnreadable
from gateway.core.principal import Role
from gateway.runtime.intake.pairing import PairingDesk
from gateway.runtime.people.directory import PeopleDirectory
from gateway.store import AuditLog, KeyValue, Pairings, PersonLinks, Store
from gateway.web.view import ACCESS_LISTS, Revoked

AUDIT_KIND = "access-revoked"


@dataclass(frozen=True, slots=True)
class Written:
    """What became of a change of config.toml: refused (nothing written, and why), or
    written, with what the running gateway could not do with it (a restart it waits for)."""

    refused: str | None = None
    notes: tuple[str, ...] = ()


class AccessConfig(Protocol):
    """The configuration a revocation reads and changes."""

    def current(self) -> Settings:
        """The configuration in effect (after :meth:`write`: with the change)."""

    async def write(self, edits: Mapping[str, list[str]], *, by: str) -> Written:
        """Write the lists ``edits`` names into config.toml, and have the running gateway
        apply them; ``by``: who asked, for the audit log."""


class Revocation:
    def __init__(
        self,
        desk: PairingDesk,
        *,
        pairings: Pairings,
        audit: AuditLog,
        links: PersonLinks,
        kv: KeyValue,
        config: AccessConfig,
    ) -> None:
        self._desk = desk
        self._pairings = pairings
        self._audit = audit
        self._links = links  # who else a revoked address is (what still lets them in)
        self._kv = kv
        self._config = config

    @classmethod
    def of(cls, store: Store, config: AccessConfig) -> Revocation:
        return cls(
            PairingDesk.of(store),
            pairings=store.pairings,
            audit=store.audit,
            links=store.links,
            kv=store.kv,
            config=config,
        )

    async def revoke(
        self, channel: str, sender_id: str, *, by: str, by_owner: bool = True
    ) -> Revoked:
        """Take ``sender_id``'s access on ``channel`` away (see the module docstring).
        ``by_owner``: the owner asks (the command line, the control center, the owner's
        chat); an admin may not revoke an admin or an owner."""
        settings = self._config.current()
        section = settings.channel_sections().get(channel)
        if section is None:  # the web chat, the terminal: nobody is let in there this way
            return Revoked(channel, sender_id)
        role = section.role_of(sender_id)
        if not by_owner and role is not Role.MEMBER:
            why = f"{channel} user {sender_id} is an {role.value}, and only the owner may revoke"
            return Revoked(channel, sender_id, refused=f"{why} an admin or an owner")
        paired = await self._pairings.is_approved(channel, sender_id)
        try:
            edits = await asyncio.to_thread(lists_without, settings, channel, sender_id)
        except ConfigFileUnreadable as exc:
            return Revoked(channel, sender_id, refused=f"{exc}; fix it in an editor first")
        if not paired and not edits:
            still = await asyncio.to_thread(still_listed, settings, channel, sender_id)
            return Revoked(channel, sender_id, still=tuple(still))
        written = Written()
        if edits:  # config.toml first: refused, nothing has changed (the pairing is kept too)
            written = await self._config.write(edits, by=by)
            if written.refused is not None:
                return Revoked(channel, sender_id, refused=written.refused)
        paired = paired and await self._desk.revoke(channel, sender_id, by=by)
        now = self._config.current()
        still = await asyncio.to_thread(still_listed, now, channel, sender_id)
        notes = [*written.notes, *await self._still_let_in(now, channel, sender_id)]
        revoked = Revoked(channel, sender_id, paired, tuple(edits), tuple(still), tuple(notes))
        await self._audit.record(
            AUDIT_KIND,
            channel=channel,
            sender_id=sender_id,
            by=by,
            pairing=revoked.pairing,
            lists=list(revoked.lists),
            still=list(revoked.still),
        )
        return revoked

    async def _still_let_in(self, settings: Settings, channel: str, sender_id: str) -> list[str]:
        """What lets ``sender_id`` talk to the bot, or makes them more than a member, after
        the revocation: everyone is let in, or another address of their person is."""
        section = settings.channel_sections()[channel]
        notes = []
        if section.dm_policy == "open":
            notes.append(f'{channel}.dm_policy is "open": anyone may still write to the bot there')
        elif "*" in section.allow_from:
            notes.append(f'{channel}.allow_from has "*": anyone may still write to the bot there')
        directory = PeopleDirectory(
            settings.people,
            settings.channel_sections(),
            self._links,
            self._kv,
            scope=settings.session.scope,
        )
        identity = await directory.identify(f"{channel}:{sender_id}")
        if identity.linked:
            others = ", ".join(a for a in identity.addresses if a != identity.address)
            where = (
                f"people.{identity.name}.ids in config.toml"
                if identity.name
                else "the control center's People page (Unlink)"
            )
            notes.append(
                f"{channel}:{sender_id} is one person with {others}, who is "
                f"{identity.role.value}: while one of those addresses may talk to the bot, so "
                f"may this one, with that role; take it apart in {where}"
            )
        return notes


def lists_without(settings: Settings, channel: str, sender_id: str) -> dict[str, list[str]]:
    """The lists of ``[channel]`` in config.toml that name ``sender_id``, without it."""
    if not settings.config_file.exists():
        return {}
    text = config_text(settings.config_file)
    keys = [f"{channel}.{name}" for name in ACCESS_LISTS]
    groups = get_key(text, f"{channel}.groups")
    if isinstance(groups, dict):
        keys += [f"{channel}.groups.{group}.allow_from" for group in groups if "." not in group]
    edits = {}
    for key in keys:
        listed = get_key(text, key)
        if isinstance(listed, list) and sender_id in (entries := [str(e) for e in listed]):
            edits[key] = [entry for entry in entries if entry != sender_id]
    return edits


def still_listed(settings: Settings, channel: str, sender_id: str) -> list[str]:
    """Where the effective settings still list ``sender_id`` (set where a revocation does
    not write: the environment, ``.env``, a secret file), each with where to take it out."""
    section = settings.channel_sections()[channel]
    sources = describe(settings.home)
    found = []
    for name in ACCESS_LISTS:
        entries = tuple(e for e in getattr(section, name) if e != "*")
        if section.lists(sender_id, entries):
            origins = sources.origins((channel, name))
            outside = [o for o in origins if not o.startswith(str(settings.config_file))]
            where = " and ".join(outside or origins)
            found.append(f"{sender_id} is in {channel}.{name}, set by {where}: take it out there")
    return found
