"""What is answered at intake, beside the chat's queue: ``/stop``, ``/status``, ``/new``,
``/help``, and edits of messages. A person asks "is it stuck?" or "stop" exactly while a
turn runs, so these never wait behind it.

- ``/stop`` (or a stop phrase alone in a message, while a turn runs, ``agent.stop_phrases``)
  asks the running turn to stop: durably (a restart closes the turn instead of resuming it),
  then in memory (the turn stops at its next boundary: a model call is cut at once, a call
  with a side effect finishes first). The messages queued behind it are dropped. The turn's
  own last message says what was stopped and what it had already done (an API client's
  ``/stop``, a request of its own, is answered too); a turn parked for an approval is closed
  the same way. Only the person who started the turn, the channel's
  admins and the owner may stop it. A second ``/stop`` is answered, and changes nothing.
- ``/status`` says what the running turn does now, how full the conversation is, and what
  today cost; ``/help`` lists the commands; ``/new`` stops a running turn first, then starts
  a fresh conversation. A group's conversation is everyone's there, so in a group only the
  owner and admins may start it afresh (or everyone allowed to talk there, with the
  channel's ``new_in_groups = "members"``); every way of saying ``/new`` (typed, a
  platform's slash command) arrives here and takes that rule.
- An edit of a message no turn took yet replaces it; an edit of a message the running turn
  answers joins that turn like a follow-up; an edit of a message already answered, or of
  one the gateway never saw, is ignored (the person can write again).

Each control closes its own journal row: with a reply (a turn of its own, committed like any
other), or without one when the stopped turn's message answers it.

:func:`stop_turn` is the one way a running turn is stopped: ``/stop``, a stop phrase and
``/new`` here, and the task API's ``DELETE /v1/tasks/{id}`` for a background task's turn
(gateway/runtime/agents/subagents.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence

from agent.request import TurnOutcome
from gateway.config.channels import ChannelSection
from gateway.core.addressing import API_CHANNEL, PROGRAM_CHANNELS
from gateway.core.commands import CONTROL_COMMANDS
from gateway.core.messages import InboundMessage, OutboundMessage, new_id
from gateway.core.principal import Principal
from gateway.core.turns import TurnControl, TurnKind
from gateway.runtime.dispatch.commands import Commands
from gateway.runtime.dispatch.dispatcher import SessionView
from gateway.runtime.intake.access import principal_for
from gateway.runtime.turns.commit import TurnCommitter
from gateway.store import InboundRecord, Journal, OpenTurn

log = logging.getLogger(__name__)

_NOT_WORDS = re.compile(r"[^\w\s]+")
# an API client's /stop: the request it stopped ends with what the turn had already done
STOPPING = "Stopping it: the request it was answering ends with what it had done so far."

# As whom another program's message acts (gateway/runtime/programs.py:ProgramRoutes.principal)
ProgramPrincipal = Callable[[InboundMessage], Principal]


async def stop_turn(journal: Journal, control: TurnControl, *, by: str, dropped: int = 0) -> None:
    """Stop a running turn: durably first (a restart closes it instead of resuming it), then
    in memory (it stops at its next boundary: a model call is cut at once, a call with a side
    effect finishes first, and it says what it had already done). ``dropped``: messages the
    stop dropped from behind it, for that last message."""
    await journal.request_stop(control.turn_id)
    control.dropped += dropped
    control.stop(by)


def stop_phrase(text: str, phrases: frozenset[str]) -> bool:
    """A message that says only "stop" (any case, punctuation and spacing aside)."""
    words = " ".join(_NOT_WORDS.sub(" ", text.lower()).split())
    return bool(words) and words in phrases


class Controls:
    def __init__(
        self,
        *,
        journal: Journal,
        commands: Commands,
        committer: TurnCommitter,
        sections: Mapping[str, ChannelSection],
        programs: ProgramPrincipal,
        stop_phrases: tuple[str, ...] = (),
    ) -> None:
        self._journal = journal
        self._commands = commands
        self._committer = committer
        self._sections = sections
        self._programs = programs  # as whom a webhook's or API token's message acts
        self._stop_phrases = frozenset(" ".join(p.lower().split()) for p in stop_phrases)

    # -- Controls (the dispatcher's) ----------------------------------------------------

    def intercepts(self, message: InboundMessage, session: SessionView) -> bool:
        if message.edit_of is not None or message.command in CONTROL_COMMANDS:
            return True
        busy = session.running is not None or _waiting(session) is not None
        return busy and stop_phrase(message.text, self._stop_phrases)

    def stops(self, message: InboundMessage) -> bool:
        """Whether a control (one :meth:`intercepts`) asks to stop the running turn."""
        return message.edit_of is None and message.command in ("/stop", None)

    async def handle(self, record: InboundRecord, session: SessionView) -> None:
        message = record.message
        try:
            if message.edit_of is not None:
                await self._edit(record, session)
            elif message.command in ("/stop", None):  # None: a stop phrase
                await self._stop(record, session)
            elif message.command == "/new":
                await self._new(record, session)
            else:
                text = await self._commands.run(
                    message, self._principal(message), session.key, session.running
                )
                await self._reply(record, session.key, text)
        except Exception:  # a control must never take the intake down; the row stays open
            log.exception("control %s in %s failed", message.command or "edit", session.key)

    # -- /stop, /new ------------------------------------------------------------------------

    async def _stop(self, record: InboundRecord, session: SessionView) -> None:
        message = record.message
        refusal = self._may_stop(message, session)
        if refusal is not None:
            await self._reply(record, session.key, refusal)
            return
        stopped = await self.stop(session, by=f"{message.channel}:{message.sender_id}")
        if stopped is None:
            await self._reply(record, session.key, "Nothing is running right now.")
        elif not stopped:
            await self._reply(record, session.key, "Already stopping.")
        elif message.channel == API_CHANNEL:  # each request waits for an answer of its own
            await self._reply(record, session.key, STOPPING)
        else:  # the stopped turn's own message answers it
            await self._journal.close_unanswered([record.id])

    async def _new(self, record: InboundRecord, session: SessionView) -> None:
        message = record.message
        refusal = self._may_start_afresh(message)
        if refusal is not None:
            await self._reply(record, session.key, refusal)
            return
        if session.running is not None or _waiting(session) is not None:
            refusal = self._may_stop(message, session)
            if refusal is not None:
                await self._reply(record, session.key, refusal)
                return
        text = await self.start_afresh(session, by=f"{message.channel}:{message.sender_id}")
        await self._reply(record, session.key, text)

    async def start_afresh(
        self, session: SessionView, *, by: str, notices: Sequence[OutboundMessage] = ()
    ) -> str:
        """``/new`` once it is allowed (also the owner's control center, whose ``notices``
        tell the chat, after what the stopped turn says): the running turn stops first, then
        the conversation starts afresh; what to tell whoever asked."""
        if session.running is not None or _waiting(session) is not None:
            await self.stop(session, by=by)
            await session.turn_ended()
        return await self._commands.start_fresh(session.key, notices)

    async def stop(self, session: SessionView, *, by: str) -> bool | None:
        """Stop the session's running (or parked, or about to be resumed) turn and drop
        what waits behind it (``/stop`` once it is allowed, and the owner's control
        center): ``True`` when stopped now, ``False`` when it was stopping already,
        ``None`` when nothing ran."""
        running, waiting = session.running, _waiting(session)
        if running is None and waiting is None:
            return None
        if running is not None and running.stopping:
            return False
        if running is not None:
            turn_id = running.turn_id
            dropped = session.drop_queued()
            await stop_turn(self._journal, running, by=by, dropped=len(dropped))
        else:  # parked for an approval, or cut short by a crash and not resumed yet
            assert waiting is not None
            turn_id = waiting.id
            dropped = session.drop_queued()
            session.stop_parked()  # before any await: its worker must not run it on
            # and after a crash (until then this message stays pending: stopped again)
            await self._journal.request_stop(turn_id)
        await self._journal.close_unanswered([r.id for r in dropped])
        log.info("turn %s stopped by %s (%d queued dropped)", turn_id, by, len(dropped))
        return True

    def _may_stop(self, message: InboundMessage, session: SessionView) -> str | None:
        """Why this person may not stop the turn, or ``None``: the person who started it,
        the channel's admins and the owner may."""
        principal = self._principal(message)
        started_by = _starter(session)
        if principal.is_admin or started_by in (None, principal.person):
            return None
        return "Only the person who asked, an admin or the owner can stop this."

    def _may_start_afresh(self, message: InboundMessage) -> str | None:
        """Why this person may not ``/new`` here, or ``None``: in a direct chat the person
        may; a group's conversation is everyone's, so there the owner and admins may, and
        members only where the channel's ``new_in_groups`` is ``"members"``."""
        if not message.is_group or self._principal(message).is_admin:
            return None
        section = self._sections.get(message.channel)
        if section is not None and section.new_in_groups == "members":
            return None
        return (
            "Only the owner or an admin can start a fresh conversation in this group, because "
            "it is everyone's conversation. It goes on as it is."
        )

    # -- edits ------------------------------------------------------------------------------

    async def _edit(self, record: InboundRecord, session: SessionView) -> None:
        edit = record.message
        assert edit.edit_of is not None
        original = await self._journal.find(edit.channel, edit.edit_of)
        queued = next((r for r in session.queued() if r.id == (original or (0,))[0]), None)
        if original is None:  # never seen (before the bot was there, or not for it): ignored
            log.info("edit of unknown message %s in %s ignored", edit.edit_of, session.key)
            await self._journal.close_unanswered([record.id])
        elif queued is not None:  # not taken by a turn yet: the edit replaces it
            session.replace_queued(queued, record)
            await self._journal.close_unanswered([queued.id])
        elif any(r.id == original[0] for r in session.running_records):
            session.queue(record)  # being answered: it joins the turn like a follow-up
        else:  # answered already: the answer stands (docs/channels.md, Edited messages)
            log.info("edit of answered message %s in %s ignored", edit.edit_of, session.key)
            await self._journal.close_unanswered([record.id])

    # -- helpers ----------------------------------------------------------------------------

    def _principal(self, message: InboundMessage) -> Principal:
        """As whom a control acts: as the message's turn would (gateway/runtime/turns/routes.py),
        so a member API token's ``/status`` is a member's."""
        if message.channel in PROGRAM_CHANNELS:
            return self._programs(message)
        return principal_for(message, self._sections.get(message.channel))

    async def _reply(self, record: InboundRecord, key: str, text: str) -> None:
        """Answer a control in a turn of its own, committed like any other."""
        turn_id = new_id()
        await self._journal.start_turn(turn_id, key, TurnKind.CHAT, [record.id])
        reply = OutboundMessage.reply_to(
            record.message, text, turn_id=turn_id, idempotency_key=f"{turn_id}:reply"
        )
        await self._committer.commit(turn_id, key, TurnOutcome((reply,), final_text=text))


def _starter(session: SessionView) -> str | None:
    """The key of the person whose message started the running (or parked) turn (their
    ``channel:sender id`` unless they have several addresses); ``None`` when none runs."""
    if session.running is not None:
        return session.running.started_by
    waiting = _waiting(session)
    if waiting is not None and waiting.records:
        last = waiting.records[-1].message
        return last.person or f"{last.channel}:{last.sender_id}"
    return None


def _waiting(session: SessionView) -> OpenTurn | None:
    """The session's turn that does not run now but will: parked for an approval, or cut
    short by a crash and about to be resumed (a ``/stop`` closes it instead)."""
    return session.parked or session.resuming
