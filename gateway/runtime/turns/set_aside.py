"""A message whose turn keeps ending the process is set aside, never tried forever.

A turn cut short by a crash resumes from its checkpoints at the next start. One that ends the
process every time it runs (a tool that crashes it, an answer that exhausts its memory, a
bug that one message alone reaches) would wedge its chat: every restart would run it again
and die again, and nothing written after it would be answered. So every resumption counts
an attempt in the journal, durably, before the turn goes on (``turns.attempts``); a turn
that was resumed ``agent.max_resume_attempts`` times and is found cut short once more is
closed instead (state ``failed``, its messages done, in the commit's one transaction): the
person gets one notice, the owner one in their home chat (where check-ins go), no restart
runs it again, and the chat answers the next message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from agent.request import TurnOutcome, TurnRequest
from agent.turn.outcome import notice
from gateway.core.messages import OutboundKind, OutboundMessage
from gateway.store import HomeChat, Journal

log = logging.getLogger(__name__)

OwnerChat = Callable[[], Awaitable[HomeChat | None]]  # where the owner hears of it

QUOTED = 200  # characters of the message the owner is shown


class SetAside:
    def __init__(
        self, journal: Journal, owner_chat: OwnerChat, *, max_resume_attempts: int
    ) -> None:
        self._journal = journal
        self._owner_chat = owner_chat
        self._max_resume_attempts = max_resume_attempts

    async def resumed(self, request: TurnRequest) -> TurnOutcome | None:
        """Count one more attempt at a turn cut short; the outcome that closes it when it
        has had its attempts (``None``: resume it)."""
        attempts = await self._journal.retry_turn(request.turn_id)
        if attempts <= self._max_resume_attempts + 1:
            return None
        cuts = attempts - 1
        log.warning(
            "turn %s for %s was cut short %d times; setting its message(s) aside",
            request.turn_id,
            request.session_key,
            cuts,
        )
        told = notice(
            request,
            f"Sorry, I could not answer this: working on it stopped me {cuts} times, so I have "
            "set it aside and will not try it again. The owner has been told. Your next "
            "message is answered as usual.",
        )
        owner = await self._owner_notice(request, cuts)
        return told if owner is None else replace(told, replies=(*told.replies, owner))

    async def _owner_notice(self, request: TurnRequest, cuts: int) -> OutboundMessage | None:
        home = await self._owner_chat()
        if home is None or home.chat == request.chat:  # the owner's own chat: told there
            return None
        last = request.last_message
        said = "" if last is None else last.text.strip()
        quoted = said[:QUOTED] + ("…" if len(said) > QUOTED else "")
        who = request.principal
        return OutboundMessage(
            channel=home.chat.channel,
            chat_id=home.chat.chat_id,
            thread_id=home.chat.thread_id,
            text=(
                f"A message from {who.sender_name or who.person} in {request.chat.session_key} was "
                f"set aside: working on it stopped Switchboard {cuts} times, so it will not be "
                f"tried again. It said: “{quoted}”. What the turn did: "
                f"`switchboard trace {request.turn_id}`."
            ),
            kind=OutboundKind.NOTICE,
            turn_id=request.turn_id,
            idempotency_key=f"{request.turn_id}:set-aside",
        )
