"""Who may talk to the bot, and as whom: decided in code from platform ids, never from text.

:class:`AccessGate` wraps the bus's intake. Every inbound message passes it before it is
journaled; a refused sender causes no turn, no model call, no tool call and no memory
write, only an audit entry and (for a DM under the pairing policy) one pairing code.
Allowlists hold immutable platform ids: a display name or username never matches.

A person with several addresses (gateway/runtime/people/directory.py) is let in on each of
them once one of theirs is: listed by id, privileged or paired (an open policy or a
wildcard vouches for nobody). The gate stamps who a let-in message is from on the message
(their person's key, role and one conversation) before it is journaled.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from gateway.config.channels import ChannelSection
from gateway.core.addressing import INTERNAL_CHANNELS, PROGRAM_CHANNELS
from gateway.core.bus import Accepted, InboundSink
from gateway.core.messages import InboundMessage, OutboundKind, OutboundMessage
from gateway.core.principal import Principal, Role
from gateway.runtime.intake.group_context import GroupContextBook
from gateway.runtime.intake.pairing import young_accounts
from gateway.runtime.people.directory import Identity, PeopleDirectory
from gateway.store import AuditLog, GroupContext, Outbox, PairingRequest, Pairings, People

log = logging.getLogger(__name__)

WILDCARD = "*"


def principal_for(msg: InboundMessage, section: ChannelSection | None) -> Principal:
    """The principal of an inbound message; roles come from ids listed in config, of the
    sender's own address or (stamped by the gate) of their person's."""
    # Channels without access settings are local (the terminal, an embedding program):
    # whoever can use them already controls the machine.
    if msg.person_role:
        role = Role(msg.person_role)
    else:
        role = section.role_of(msg.sender_id) if section is not None else Role.OWNER
    return Principal(
        msg.channel, msg.sender_id, msg.sender_name, role, msg.chat_type, person_key=msg.person
    )


def stamped(msg: InboundMessage, identity: Identity) -> InboundMessage:
    """``msg`` with who its sender is across channels (for an address alone, only the
    conversation it keeps: gateway/runtime/people/directory.py): what a channel may have
    put there is replaced, so only the gate says it."""
    conversation = "" if msg.is_group else identity.conversation
    if not identity.linked:
        return replace(msg, person="", person_role="", conversation=conversation)
    return replace(
        msg, person=identity.person, person_role=identity.role.value, conversation=conversation
    )


class Verdict(enum.Enum):
    ALLOW = "allow"
    IGNORE = "ignore"  # group chatter not addressed to the bot: not a turn, not a refusal
    PAIR = "pair"  # unknown DM sender under the pairing policy
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str = ""


def decide(msg: InboundMessage, section: ChannelSection, *, paired: bool) -> Decision:
    """The access decision for one message (pure; no I/O). ``paired``: approved by pairing."""
    sender = msg.sender_id
    role = section.role_of(sender)
    privileged = role.privileged
    listed = privileged or paired or _listed(sender, section.allow_from, section)
    if not msg.is_group:
        policy = section.dm_policy
        if policy == "disabled":
            return Decision(Verdict.REFUSE, "direct messages are disabled")
        if policy == "open" or listed:
            return Decision(Verdict.ALLOW)
        if policy == "pairing":
            return Decision(Verdict.PAIR, "unknown sender")
        return Decision(Verdict.REFUSE, "sender not on the allowlist")
    rule = section.group_rule(msg.chat_id)
    if section.group_policy == "disabled":
        return Decision(Verdict.REFUSE, "groups are disabled")
    if section.group_policy == "allowlist" and not (
        msg.chat_id in section.group_allow_from or msg.chat_id in section.groups
    ):
        return Decision(Verdict.REFUSE, "group not on the allowlist")
    if rule.allow_from is not None:
        listed = privileged or _listed(sender, rule.allow_from, section)
    if not listed:
        return Decision(Verdict.REFUSE, "sender not on the allowlist")
    require_mention = (
        section.require_mention if rule.require_mention is None else rule.require_mention
    )
    if require_mention and not msg.mentioned:
        return Decision(Verdict.IGNORE, "not addressed to the bot")
    return Decision(Verdict.ALLOW)


def _listed(sender: str, allowlist: tuple[str, ...], section: ChannelSection) -> bool:
    return WILDCARD in allowlist or section.lists(sender, allowlist)


def pairing_text(code: str, ttl_seconds: int) -> str:
    """A stranger's one answer. It does not mention ``--owner``: told to every stranger,
    it was a ready pretext ("it's me on my new phone, add --owner"); the command line tells
    the owner (``switchboard pairing list``, onboarding's next step)."""
    minutes = max(1, ttl_seconds // 60)
    return (
        "Hi! I only talk to people my owner has approved. "
        f"Your pairing code is {code} (valid for {minutes} minutes). "
        f"Ask the owner to run: switchboard pairing approve {code}"
    )


class AccessGate:
    """The :class:`InboundSink` channels get: access control in front of the bus."""

    def __init__(
        self,
        inner: InboundSink,
        *,
        sections: Mapping[str, ChannelSection],
        audit: AuditLog,
        outbox: Outbox,
        pairings: Pairings,
        people: People,
        directory: PeopleDirectory,
        group_context: GroupContext,
        on_outbound: Callable[[str], None],
    ) -> None:
        self._inner = inner
        self._directory = directory
        self._sections = sections
        self._audit = audit
        self._outbox = outbox
        self._pairings = pairings
        self._people = people
        self._on_outbound = on_outbound
        self._context = GroupContextBook(group_context)
        self._names: dict[tuple[str, str], str] = {}  # chat names already recorded
        self._person_names: dict[str, str] = {}  # people's names already recorded
        self._used: set[tuple[str, str]] = set()  # (person, chat) already recorded

    async def admits(self, msg: InboundMessage) -> bool:
        section = self._sections.get(msg.channel)
        if section is not None:
            identity = await self._directory.identify(f"{msg.channel}:{msg.sender_id}")
            if (await self._decide(msg, section, identity)).verdict is not Verdict.ALLOW:
                return False
        return await self._inner.admits(msg)

    async def settled(self, channel: str) -> None:
        await self._inner.settled(channel)

    async def _decide(
        self, msg: InboundMessage, section: ChannelSection, identity: Identity
    ) -> Decision:
        decision = decide(msg, section, paired=False)
        if decision.verdict in (Verdict.PAIR, Verdict.REFUSE) and (
            await self._pairings.is_approved(msg.channel, msg.sender_id)
            or await self._vouched(identity)
        ):
            decision = decide(msg, section, paired=True)
        return decision

    async def _vouched(self, identity: Identity) -> bool:
        """Whether another address of the sender's person is let in by name: listed by
        id or privileged in its channel's settings, or paired (an open policy or a ``*``
        lets anyone in, so it vouches for nobody)."""
        for address in identity.addresses:
            if address == identity.address:
                continue
            channel, _, sender = address.partition(":")
            section = self._sections.get(channel)
            if section is None or section.role_of(sender).privileged:
                return True
            if section.lists(sender, tuple(a for a in section.allow_from if a != WILDCARD)):
                return True
            if await self._pairings.is_approved(channel, sender):
                return True
        return False

    async def publish_inbound(self, msg: InboundMessage) -> Accepted:
        section = self._sections.get(msg.channel)
        if msg.channel in INTERNAL_CHANNELS or msg.channel in PROGRAM_CHANNELS:
            return await self._inner.publish_inbound(msg)  # no person's
        identity = await self._directory.identify(f"{msg.channel}:{msg.sender_id}")
        if section is None:  # a local chat: the owner's
            return await self._inner.publish_inbound(stamped(msg, identity))
        decision = await self._decide(msg, section, identity)
        if decision.verdict in (Verdict.ALLOW, Verdict.IGNORE):
            await self._remember_name(msg)
        if decision.verdict is Verdict.ALLOW:
            msg = stamped(msg, identity)
            await self._remember_use(msg)
            if not msg.is_group:
                if identity.one_conversation:  # scheduled messages follow them here
                    await self._directory.wrote_from(identity.person, msg.chat)
                return await self._inner.publish_inbound(msg)
            msg, heard_up_to = await self._context.attach(msg, section)
            accepted = await self._inner.publish_inbound(msg)
            if heard_up_to is not None and accepted is Accepted.NEW:
                await self._context.forget(msg, heard_up_to)
            return accepted
        if decision.verdict is Verdict.IGNORE:  # kept as context for the next turn there
            await self._context.keep(msg, section)
            return Accepted.IGNORED
        if decision.verdict is Verdict.PAIR:
            await self._pair(msg, section)
        else:
            await self._audit.record(
                "refused",
                channel=msg.channel,
                sender_id=msg.sender_id,
                chat_id=msg.chat_id,
                reason=decision.reason,
                sender_name=msg.sender_name,
            )
        return Accepted.REFUSED

    async def _remember_name(self, msg: InboundMessage) -> None:
        """A group's title, for the ``chats`` tool, and the name the sender writes under,
        for the control center (each written when new or changed)."""
        person = f"{msg.channel}:{msg.sender_id}"
        if msg.sender_name and self._person_names.get(person) != msg.sender_name:
            await self._people.name_person(person, msg.sender_name)
            self._person_names[person] = msg.sender_name
        if not msg.chat_name or not msg.is_group:
            return
        key = (msg.channel, msg.chat_id)
        if self._names.get(key) == msg.chat_name:
            return
        await self._people.name_chat(msg.channel, msg.chat_id, msg.chat_name, msg.chat_type.value)
        self._names[key] = msg.chat_name

    async def _remember_use(self, msg: InboundMessage) -> None:
        """A chat a person writes in is one of theirs: sends there need no confirmation."""
        person = msg.person or f"{msg.channel}:{msg.sender_id}"
        key = (person, msg.chat_id)
        if key in self._used:
            return
        await self._people.sent_to(person, msg.channel, msg.chat_id, durable=False)
        self._used.add(key)

    async def _dropped(
        self, msg: InboundMessage, section: ChannelSection, oldest: PairingRequest | None
    ) -> None:
        """A full pairing queue: the stranger gets no reply and no code; the channel's
        owners are told once per full queue (keyed by its oldest request)."""
        await self._audit.record(
            "pairing-dropped",
            channel=msg.channel,
            sender_id=msg.sender_id,
            sender_name=msg.sender_name,
            reason="the pairing queue is full; the oldest requests are kept",
        )
        if oldest is None or not section.owners:
            return
        notices = [
            OutboundMessage(
                channel=msg.channel,
                chat_id=owner,
                text=(
                    f"Pairing requests on {msg.channel} are being dropped: the queue is full "
                    "(the oldest are kept, and new senders get no code). `/pair list` shows "
                    "them; `/pair clear` empties the queue."
                ),
                kind=OutboundKind.NOTICE,
                idempotency_key=f"pairing-dropped:{msg.channel}:{oldest.code}:{owner}",
                direct=True,
            )
            for owner in section.owners
        ]
        if await self._outbox.enqueue(notices):
            self._on_outbound(msg.channel)

    async def _pair(self, msg: InboundMessage, section: ChannelSection) -> None:
        requested = await self._pairings.request(
            channel=msg.channel,
            sender_id=msg.sender_id,
            sender_name=msg.sender_name,
            chat_id=msg.chat_id,
            ttl=section.pairing_ttl_seconds,
            young=young_accounts(section, now=time.time()),
        )
        request = requested.request
        if request is None:
            await self._dropped(msg, section, requested.oldest)
            return
        await self._audit.record(
            "pairing",
            channel=msg.channel,
            sender_id=msg.sender_id,
            code=request.code,
            sender_name=msg.sender_name,
        )
        reply = OutboundMessage(
            channel=msg.channel,
            chat_id=msg.chat_id,
            text=pairing_text(request.code, section.pairing_ttl_seconds),
            kind=OutboundKind.NOTICE,
            idempotency_key=f"pairing:{msg.channel}:{request.code}",
        )
        if await self._outbox.enqueue([reply]):
            self._on_outbound(msg.channel)
