"""Self-service linking: ``/link`` and ``/unlink``, and the owner's links from the control center.

``/link`` in a direct chat gives a code (:data:`CODE_SECONDS`, once). The same person sends
``/link CODE`` from a direct chat on another channel: that address joins the person of the
one that asked. Both chats are behind the access gate, so both addresses passed it (a
stranger's ``/link`` gets a pairing code, never this). Knowing a code is what proves the
two addresses are one person, so a code is shown only in the chat that asked for it. When
their direct chats become one conversation (``session.scope = "person"``), it goes on from
the conversation of the chat that asked for the code, if it has nothing of its own yet.

A link that would raise someone's role (a member's address joining the owner, or the
owner's joining a member, whose person would then hold the owner's role) is never made on
a code alone: it waits for the owner's ``/link confirm CODE`` (or the control center), for
:data:`CONFIRM_SECONDS`, and the owner is told what it would give whom. Addresses config
lists together (``[people.<name>] ids``) are changed in config only. Every code, link,
wait and unlink is in the audit log, and an address whose codes were refused
:data:`MAX_REFUSALS` times in an hour has its codes ignored for the rest of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from agent.memory import fold_notes, person_recall, person_scope
from gateway.core.addressing import (
    PERSON_CHANNEL,
    agent_of,
    chat_of,
    person_conversation,
    qualify,
)
from gateway.core.clock import Clock
from gateway.core.messages import InboundMessage, OutboundKind, OutboundMessage
from gateway.core.principal import Principal, Role
from gateway.runtime.people.directory import Identity, PeopleDirectory, highest
from gateway.store import AuditLog, History, HomeChat, LinkCode, Outbox, PersonLinks, Recall

log = logging.getLogger(__name__)

CODE_SECONDS = 600  # a /link code is good for ten minutes
CONFIRM_SECONDS = 86_400  # a link waiting for the owner, for a day
# Codes are not guessed: after this many refusals in an hour an address's codes are not
# looked at until the hour has passed (31^8 codes: at ten an hour, about ten million years).
MAX_REFUSALS = 10
REFUSALS_WINDOW = 3_600.0

Home = Callable[[], Awaitable[HomeChat | None]]  # the owner's chat (OwnersChat.get)


class LinkRefused(Exception):
    """A link or unlink that cannot be made, with what to tell the person."""


class Linking:
    def __init__(
        self,
        directory: PeopleDirectory,
        links: PersonLinks,
        *,
        history: History,
        recall: Recall,
        workspaces: Mapping[str, Path],
        keep: int,
        audit: AuditLog,
        outbox: Outbox,
        owner_home: Home,
        on_outbound: Callable[[str], None],
        clock: Clock,
    ) -> None:
        self.directory = directory
        self._links = links
        self._history = history  # the conversation a link carries over
        self._recall = recall  # whose past conversations memory search finds
        self._workspaces = workspaces  # each agent's, where each person's notes are
        self._keep = keep  # messages carried over at most (agent.history_max_messages)
        self._audit = audit
        self._outbox = outbox
        self._owner_home = owner_home  # where the owner is asked to confirm a link
        self._on_outbound = on_outbound
        self._clock = clock
        self._begun: set[str] = set()  # person conversations known to have begun

    def _now(self) -> float:
        return self._clock.now().timestamp()

    # -- the commands -----------------------------------------------------------------------

    async def command(
        self, words: list[str], principal: Principal, *, direct: bool, session_key: str
    ) -> str:
        """``/link``, ``/link CODE``, ``/link confirm CODE``, ``/unlink``, ``/unlink ADDRESS``
        (``words``: the command and what follows it; ``session_key``: the conversation of
        the chat it was sent in)."""
        if not direct:
            return f"Links are private: use {words[0]} in a direct chat with me."
        try:
            if words[0] == "/unlink":
                return await self._unlink(principal, words[1] if len(words) > 1 else None)
            if len(words) == 1:
                return await self._new_code(principal, session_key)
            if words[1].lower() == "confirm" and len(words) == 3:
                return await self._confirm(principal, words[2])
            if len(words) == 2:
                return await self._use(principal, words[1])
        except LinkRefused as exc:
            return str(exc)
        return (
            "Usage: /link (a code for your other chat), /link CODE (sent from that chat), "
            "/unlink (this chat is yours alone again), /unlink CHANNEL:ID"
        )

    async def _new_code(self, principal: Principal, session_key: str) -> str:
        code = await self._links.new_code(
            principal.address, asked_in=session_key, now=self._now(), ttl=CODE_SECONDS
        )
        await self._audit.record(
            "link-code", channel=principal.channel, sender_id=principal.sender_id
        )
        minutes = CODE_SECONDS // 60
        return (
            f"Your link code is {code.code} (valid {minutes} minutes, once). Send "
            f"/link {code.code} to me from your chat on another channel, and both are you: "
            "the same memory, time zone and allowance. Show it to nobody else: whoever sends "
            "it links their chat to you."
        )

    async def _refused(self, principal: Principal, reason: str) -> None:
        """Audit a refused request (also what counts toward :data:`MAX_REFUSALS`)."""
        await self._audit.record(
            "refused", channel=principal.channel, sender_id=principal.sender_id, reason=reason
        )

    async def _use(self, principal: Principal, code_text: str) -> str:
        """``/link CODE`` from ``principal``'s address: it joins the person who asked."""
        sender = principal.address
        now = self._now()
        code = code_text.strip().upper()
        refusals = await self._audit.count(
            "refused",
            channel=principal.channel,
            sender_id=principal.sender_id,
            since=now - REFUSALS_WINDOW,
        )
        if refusals >= MAX_REFUSALS:
            await self._refused(principal, "too many refused link codes")
            return (
                "Too many link codes from this chat were refused: I'm not looking at codes "
                "from it for the next hour."
            )
        found = await self._links.peek(code)
        if (
            found is None
            or found.state != "open"
            or found.expires_at <= now
            or (found.address == sender)
        ):
            # a guess, a replay, a lapsed code: the owner sees them
            await self._refused(principal, "no open link code")
            return (
                f"No open link code {code}: codes are good for {CODE_SECONDS // 60} minutes, "
                "once, and are sent from another chat than the one that asked."
            )
        asker = await self.directory.identify(found.address)
        joining = await self.directory.identify(sender)
        if asker.person == joining.person:
            return "These chats are already one person."
        self._movable(joining)
        if asker.role is not joining.role:
            taken = await self._links.take(
                code, by=sender, now=now, state="waiting", ttl=CONFIRM_SECONDS
            )
            if taken is None:
                return f"No open link code {code}."
            await self._audit.record(
                "link-waiting",
                channel=principal.channel,
                sender_id=principal.sender_id,
                person=asker.person,
                roles=f"{joining.role.value}->{asker.role.value}",
            )
            await self._ask_owner(code, sender, asker, joining)
            return (
                f"Linking would give one of these chats the role of {_higher(asker, joining)}, "
                "so the owner has to confirm it first; nothing is linked until they do. "
                f"(Owner: /link confirm {code} in a direct chat with me.)"
            )
        if await self._links.take(code, by=sender, now=now, state="used") is None:
            return f"No open link code {code}."
        await self._link(joining, asker, by=sender)
        return _linked_text(sender, asker, await self._carry_over(found, sender, joining))

    async def _confirm(self, principal: Principal, code: str) -> str:
        if not principal.is_owner:
            await self._refused(principal, "/link confirm needs the owner")
            return "Only the owner can confirm a link."
        return await self.confirm(code, by=principal.address)

    async def _unlink(self, principal: Principal, target: str | None) -> str:
        me = await self.directory.identify(principal.address)
        address = target or principal.address
        if address not in me.addresses or not me.linked:
            return (
                f"{address} is not linked to you."
                if target
                else "This chat is not linked to any other."
            )
        return await self.unlink(address, by=principal.address)

    # -- what the owner does too (the control center) -------------------------------------

    async def confirm(self, code: str, *, by: str) -> str:
        """The owner's word on a link waiting for it."""
        taken = await self._links.confirm(code, now=self._now())
        if taken is None or taken.used_by is None:
            return f"No link waits for confirmation under {code.strip().upper()}."
        asker = await self.directory.identify(taken.address)
        joining = await self.directory.identify(taken.used_by)
        await self._link(joining, asker, by=by)
        carried = await self._carry_over(taken, taken.used_by, joining)
        return _linked_text(taken.used_by, asker, carried)

    async def link(self, address: str, to: str, *, by: str) -> str:
        """The owner links ``address`` to the person ``to`` is one of (no code: the owner
        may give any role)."""
        asker = await self.directory.identify(to)
        joining = await self.directory.identify(address)
        if asker.person == joining.person:
            return f"{address} and {to} are already one person."
        self._movable(joining)
        await self._link(joining, asker, by=by)
        return _linked_text(address, asker)

    async def unlink(self, address: str, *, by: str) -> str:
        """``address`` is its own person again (config's links stay: config changes them).
        The one path of ``/unlink``, ``/unlink ADDRESS`` and the control center. With one
        conversation across the person's chats, the person keeps it (also with one address
        left) and each address that leaves starts a fresh one (:meth:`_part`)."""
        identity = await self.directory.identify(address)
        if address in identity.listed:
            raise LinkRefused(
                f"{address} is linked in the configuration ([people.{identity.name}] ids): "
                "the owner changes it there."
            )
        removed = await self._links.unlink(address)
        for each in removed:
            channel, _, sender = each.partition(":")
            await self._audit.record(
                "person-unlinked", channel=channel, sender_id=sender, person=identity.person, by=by
            )
        if not removed:
            return f"{address} is not linked to any other chat."
        others = ", ".join(a for a in removed if a != address) or identity.person
        text = f"Unlinked {address} from {others}: each is its own again."
        if not identity.one_conversation:
            return text  # each chat was its own conversation all along
        await self._part(identity.person, removed)
        fresh = ", ".join(removed)
        starts = (
            "This chat starts" if removed == [by] else f"{fresh} start{'s' * (len(removed) == 1)}"
        )
        return (
            f"{text} {starts} a fresh conversation (earlier messages are kept on disk but no "
            f"longer in my context there); ours goes on in {identity.person}'s chats."
        )

    async def _part(self, person: str, leaving: list[str]) -> None:
        """``leaving`` left ``person``: the person keeps their one conversation (also with
        one address left), and each address that left starts one of its own, afresh (the
        one it had before the link is not taken up again)."""
        await self.directory.keeps(person)
        await self.directory.parted(person, leaving)
        for address in leaving:
            await self.directory.keeps(address)
            for agent in self._workspaces:
                await self._history.new_generation(qualify(agent, person_conversation(address)))

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _movable(joining: Identity) -> None:
        if joining.address in joining.listed:
            raise LinkRefused(
                f"{joining.address} is linked in the configuration ([people.{joining.name}] "
                "ids): the owner changes it there."
            )

    async def _link(self, joining: Identity, asker: Identity, *, by: str) -> None:
        """``joining`` (as it was before) becomes one of ``asker``'s person."""
        address = joining.address
        await self._links.link(address, asker.person, by=by, now=self._now())
        await self._bring_along((joining, asker), await self.directory.identify(address))
        channel, _, sender = address.partition(":")
        await self._audit.record(
            "person-linked",
            channel=channel,
            sender_id=sender,
            person=asker.person,
            role=asker.role.value,
            by=by,
        )

    async def _bring_along(self, before: tuple[Identity, ...], after: Identity) -> None:
        """What was kept under a person before the link follows the person they are part of
        now: their memory notes (in each agent's workspace) and their past conversations,
        which memory search finds under the person's key."""
        owner = after.role is Role.OWNER
        into = person_scope(after.person, owner=owner)
        for was in before:
            had_owner = was.role is Role.OWNER
            source = person_scope(was.person, owner=had_owner)
            if source.directory == into.directory:
                continue
            for root in self._workspaces.values():
                moved = await asyncio.to_thread(
                    fold_notes, root, source, into, origin=", ".join(was.addresses)
                )
                if moved:
                    log.info("notes of %s moved into %s", was.person, ", ".join(moved))
            await self._recall.follow(
                person_recall(was.person, owner=had_owner),
                person_recall(after.person, owner=owner),
                old_person=was.person,
                new_person=after.person,
            )

    async def _carry_over(self, code: LinkCode, address: str, joining: Identity) -> str:
        """Once ``address`` is linked by ``code``: when the person's direct chats are one
        conversation now, it goes on (if it has nothing of its own yet) from the
        conversation of the chat that asked for the code; or, when that chat was alone and
        ``joining`` (the address, before the link) was already one conversation across
        chats of its own, from that one, so a second link never leaves the longer story
        behind. Whose conversation went on ("": none)."""
        asked_in = code.asked_in
        if asked_in is None:
            return ""
        conversation = (await self.directory.identify(address)).conversation
        if not conversation:
            return ""  # each chat stays its own conversation
        agent = agent_of(asked_in)
        target = qualify(agent, conversation)
        source, whose = asked_in, code.address
        alone = not chat_of(asked_in).startswith(f"{PERSON_CHANNEL}:")
        if alone and joining.conversation:
            source, whose = qualify(agent, joining.conversation), ", ".join(joining.addresses)
        if target == source:  # it was the person's conversation already: it goes on
            return whose if await self._history.message_count(target) else ""
        carried = await self._history.continue_from(
            source, target, keep=self._keep, written_on=_channel_of(source)
        )
        return whose if carried else ""

    async def first_turn(self, session_key: str, msg: InboundMessage) -> None:
        """Before a turn of ``msg`` in ``session_key``: a person's one conversation across
        chats that was never used goes on from the conversation of the chat ``msg`` came
        from (``session.scope = "person"`` turned on for people linked already, config's
        ``ids``, a link whose asking chat had nothing yet), so nothing said there is
        dropped unsaid. Once used (or started afresh) it is never filled again."""
        if not msg.conversation or chat_of(session_key) != msg.conversation:
            return
        if session_key in self._begun:
            return
        if not await self._history.known(session_key):
            source = qualify(agent_of(session_key), msg.session_key)
            await self._history.continue_from(
                source, session_key, keep=self._keep, written_on=msg.channel
            )
        self._begun.add(session_key)

    async def _ask_owner(self, code: str, sender: str, asker: Identity, joining: Identity) -> None:
        home = await self._owner_home()
        if home is None:
            return  # the control center's people page shows it
        text = (
            f"{sender} sent the link code that {asker.address} asked for. Linking them makes "
            f"one person of {', '.join((*asker.addresses, *joining.addresses))}, with the "
            f"role of {_higher(asker, joining)}: every address of theirs could do what that "
            f"role may. If they are all one person, reply /link confirm {code}; if not, "
            "ignore this (it lapses in a day)."
        )
        notice = OutboundMessage(
            channel=home.chat.channel,
            chat_id=home.chat.chat_id,
            text=text,
            kind=OutboundKind.NOTICE,
            idempotency_key=f"link-confirm:{code}",
        )
        if await self._outbox.enqueue([notice]):
            self._on_outbound(home.chat.channel)


def _channel_of(session_key: str) -> str | None:
    """The channel of a chat's conversation (``None``: a person's, whose messages say
    their channel already)."""
    channel = chat_of(session_key).partition(":")[0]
    return None if channel == PERSON_CHANNEL else channel


def _higher(one: Identity, other: Identity) -> str:
    return highest((one.role, other.role)).value


def _linked_text(address: str, asker: Identity, carried: str = "") -> str:
    """``carried``: the chats whose conversation goes on in all of them ("": none)."""
    text = (
        f"Linked: {address} is one person with {', '.join(asker.addresses)} now (/unlink "
        "undoes it)."
    )
    if carried:
        text += f" Our conversation from {carried} goes on in all of these chats."
    return text
