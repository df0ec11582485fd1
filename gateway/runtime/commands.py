"""Slash commands answered by the gateway itself, without a model call."""

from __future__ import annotations

import re

from gateway.core.commands import COMMANDS
from gateway.core.messages import InboundMessage
from gateway.core.principal import Principal
from gateway.core.turns import TurnControl
from gateway.runtime import pairing
from gateway.runtime.approvals import Approvals
from gateway.runtime.status_text import StatusText
from gateway.store import Store

_COMMAND_WORD = re.compile(r"/[a-z][a-z0-9_]{0,31}")


class Commands:
    def __init__(
        self,
        *,
        agent_name: str,
        store: Store,
        status: StatusText,
        approvals: Approvals | None = None,
    ) -> None:
        self._name = agent_name
        self._store = store
        self._status = status
        self._approvals = approvals

    def handles(self, msg: InboundMessage) -> bool:
        """Known commands, and in direct chats anything shaped like one (``/foo``), which
        gets a list of the commands instead of going to the model unannounced. In groups an
        unknown ``/word`` may be meant for another bot, so it is left alone."""
        command = msg.command
        if command is None:
            return False
        return command in COMMANDS or (
            not msg.is_group and _COMMAND_WORD.fullmatch(command) is not None
        )

    async def run(
        self,
        msg: InboundMessage,
        principal: Principal,
        session_key: str,
        running: TurnControl | None = None,
    ) -> str:
        """Answer a command; ``session_key`` is the conversation it was sent in (with the
        agent that owns it), the one ``/new`` starts afresh; ``running`` its turn running
        now, if any (``/status`` says what it does)."""
        command = msg.command
        if command == "/pair":
            return await self._pair(msg, principal)
        if command == "/new":
            await self._store.history.new_generation(session_key)
            return "Started a fresh conversation. Earlier messages are kept on disk but no longer in my context."
        if command == "/status":
            return await self._status.render(msg, principal, session_key, running)
        if command in ("/approve", "/deny"):
            if self._approvals is None:
                return "Nothing here needs approval: tools.approvals is not set to ask."
            return await self._approvals.decide(msg, principal, approve=command == "/approve")
        listing = "\n".join(f"{name} - {text}" for name, text in COMMANDS.items())
        if command == "/start":
            return f"Hi, I'm {self._name}. Just write to me like you would to a colleague.\n\n{listing}"
        if command not in COMMANDS:
            return (
                f"I don't know the command {command}. To ask me something, just write it "
                f"without the slash. Commands:\n{listing}"
            )
        return listing

    async def _pair(self, msg: InboundMessage, principal: Principal) -> str:
        if not principal.is_admin:
            await self._store.audit.record(
                "refused",
                channel=msg.channel,
                sender_id=msg.sender_id,
                reason="/pair needs an admin",
            )
            return "Only an admin can manage pairing."
        if msg.is_group:
            return "Pairing codes are private: use /pair in a direct chat with me."
        words = msg.text.split()[1:]
        action = words[0].lower() if words else "list"
        by = f"{msg.channel}:{msg.sender_id}"
        # The owner manages every channel; an admin only the channel they are an admin of.
        scope = None if principal.is_owner else msg.channel
        if action == "list":
            return await pairing.listing_text(self._store, channel=scope)
        if action == "clear":
            count = await pairing.clear(self._store, by=by, channel=scope)
            return f"Cleared {count} open pairing request(s)."
        if action in ("approve", "deny") and len(words) == 2:
            decide = pairing.approve if action == "approve" else pairing.deny
            request = await decide(self._store, words[1], by=by, channel=scope)
            if request is None:
                return (
                    f"No pending request with code {words[1].upper()} (expired or already decided)."
                )
            return f"{action.capitalize()}d {request.channel} user {request.sender_id}."
        if action == "revoke" and len(words) == 2:
            if await pairing.revoke(self._store, msg.channel, words[1], by=by):
                return f"Revoked {msg.channel} user {words[1]}."
            return f"{words[1]} was not a paired user on {msg.channel}."
        return "Usage: /pair [list | approve CODE | deny CODE | revoke USER_ID | clear]"
