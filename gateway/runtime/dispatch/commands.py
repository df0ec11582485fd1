"""Slash commands answered by the gateway itself, without a model call."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence

from agent.agent import Agent
from agent.prompt_report import Cached
from gateway.core.commands import COMMANDS
from gateway.core.messages import ChatRef, InboundMessage, OutboundMessage
from gateway.core.principal import Principal
from gateway.core.turns import TurnControl
from gateway.runtime.dispatch import skills
from gateway.runtime.dispatch.status_text import StatusText
from gateway.runtime.dispatch.usage_text import UsageText
from gateway.runtime.intake.pairing import PairingDesk
from gateway.runtime.intake.revoke import Revocation
from gateway.runtime.intake.routing import agent_for
from gateway.runtime.people.linking import Linking
from gateway.runtime.turns.approvals import Approvals
from gateway.store import AuditLog, Store, UsageReport

_COMMAND_WORD = re.compile(r"/[a-z][a-z0-9_]{0,31}")


class Commands:
    def __init__(
        self,
        *,
        agent_name: str,
        store: Store,
        audit: AuditLog,
        usage_report: UsageReport,
        pairing: PairingDesk,
        revocation: Revocation,
        status: StatusText,
        usage: UsageText,
        approvals: Approvals,
        linking: Linking,
        agents: Mapping[str, Agent] | None = None,
    ) -> None:
        self._name = agent_name
        self._linking = linking
        self._store = store
        self._history = store.history
        self._audit = audit
        self._usage_report = usage_report
        self._pairing = pairing
        self._revocation = revocation
        self._status = status
        self._usage = usage
        self._approvals = approvals
        self._agents = agents or {}

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

    async def start_fresh(self, session_key: str, notices: Sequence[OutboundMessage] = ()) -> str:
        """``/new``: a fresh conversation (also the control center's "Start fresh", whose
        ``notices`` tell the chat, queued with it)."""
        await self._store.start_fresh(session_key, notices)
        return "Started a fresh conversation. Earlier messages are kept on disk but no longer in my context."

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
        if command in ("/pair", "/link", "/unlink"):  # who may talk, and as whom
            return await self._people(msg, principal, session_key)
        if command == "/new":
            return await self.start_fresh(session_key)
        if command == "/status":
            return await self._status.render(msg, principal, session_key, running)
        if command == "/model":
            return await self._model(msg, principal, session_key)
        if command in ("/compact", "/context"):  # this chat's context: summarize it, show it
            context = self._compact if command == "/compact" else self._context
            return await context(principal, session_key, msg.chat)
        if command == "/usage":
            return await self._usage.render(msg.text.split()[1:], principal)
        if command in ("/approve", "/deny"):
            return await self._approvals.decide(msg, principal, approve=command == "/approve")
        if command == "/show":
            return await self._approvals.show(msg, principal)
        if command == "/skills":
            agent = agent_for(self._agents, session_key) if self._agents else None
            if agent is None:
                return "No skills here."
            return await asyncio.to_thread(skills.answer, msg, principal, agent.context.skills)
        listing = "\n".join(f"{name} - {text}" for name, text in COMMANDS.items())
        if command == "/start":
            return f"Hi, I'm {self._name}. Just write to me like you would to a colleague.\n\n{listing}"
        if command not in COMMANDS:
            return (
                f"I don't know the command {command}. To ask me something, just write it "
                f"without the slash. Commands:\n{listing}"
            )
        return listing

    async def _people(self, msg: InboundMessage, principal: Principal, session_key: str) -> str:
        """``/pair`` (admins: who may talk), ``/link`` and ``/unlink`` (anyone: one person
        on several channels, gateway/runtime/people/linking.py)."""
        command = msg.command
        if command == "/pair":
            return await self._pair(msg, principal)
        words = [command or "/link", *msg.text.split()[1:]]
        return await self._linking.command(
            words, principal, direct=not msg.is_group, session_key=session_key
        )

    async def _pair(self, msg: InboundMessage, principal: Principal) -> str:
        if not principal.is_admin:
            await self._audit.record(
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
            return await self._pairing.listing_text(channel=scope)
        if action == "clear":
            count = await self._pairing.clear(by=by, channel=scope)
            return f"Cleared {count} open pairing request(s)."
        if action in ("approve", "deny") and len(words) == 2:
            request = await self._pairing.decide(
                words[1], approve=action == "approve", by=by, channel=scope
            )
            if request is None:
                return (
                    f"No pending request with code {words[1].upper()} (expired or already decided)."
                )
            return f"{action.capitalize()}d {request.channel} user {request.sender_id}."
        if action == "revoke" and len(words) == 2:
            if words[1] == msg.sender_id:
                return (
                    "That is your own address: revoking it here would lock you out of this "
                    "chat. `switchboard pairing revoke` at the machine does it."
                )
            # as the command line and the control center do: the pairing, and the place in
            # config.toml's lists (an admin may not revoke an admin or an owner)
            revoked = await self._revocation.revoke(
                msg.channel, words[1], by=by, by_owner=principal.is_owner
            )
            return revoked.text()
        return "Usage: /pair [list | approve CODE | deny CODE | revoke USER_ID | clear]"

    async def _model(self, msg: InboundMessage, principal: Principal, session_key: str) -> str:
        """List the models this chat may use, or switch it to one (``/model NAME``), or back
        to the agent's (``/model default``). Owner and admins only: a model costs money."""
        if not principal.is_admin:
            return "Only the owner or an admin can switch the model."
        agent = agent_for(self._agents, session_key) if self._agents else None
        if agent is None:
            return "No model to switch to here."
        state, _ = await self._history.load(session_key, limit=0)
        names = list(agent.choices)
        current = state.model if state.model in agent.choices else agent.model.model
        words = msg.text.split()[1:]
        if not words:
            listed = ", ".join(
                f"{name}{' (default)' if name == agent.model.model else ''}"
                f"{' ← this chat' if name == current else ''}"
                for name in names
            )
            return f"Models: {listed}. Switch with /model NAME, back with /model default."
        wanted = words[0]
        if wanted.lower() == "default":
            await self._history.set_model(session_key, None)
            return f"This chat uses the default model again: {agent.model.model}."
        if wanted not in agent.choices:
            return f"No model {wanted!r} is configured; choose one of: {', '.join(names)}."
        await self._history.set_model(session_key, wanted)
        return f"This chat uses {wanted} from now on (/model default to go back)."

    async def _compact(self, principal: Principal, session_key: str, chat: ChatRef) -> str:
        agent = agent_for(self._agents, session_key) if self._agents else None
        if agent is None:
            return "Nothing to compact here."
        done = await agent.compact_now(session_key, principal, chat)
        if done is None or not done.kept:
            return (
                "Nothing to compact: the conversation is short, or a summary would not save room."
            )
        saved = done.tokens_before - done.tokens_after
        return (
            f"Compacted: {done.summarized} older messages became a summary; the conversation "
            f"went from about {done.tokens_before:,} to {done.tokens_after:,} tokens "
            f"({saved:,} saved)."
        )

    async def _context(self, principal: Principal, session_key: str, chat: ChatRef) -> str:
        agent = agent_for(self._agents, session_key) if self._agents else None
        if agent is None:
            return "No agent answers here."
        last = await self._usage_report.last_turn(session_key)
        cached = None if last is None else Cached(*last)
        report = await agent.prompt_report(session_key, principal, chat, cached)
        return report.render()
