"""Agent-to-agent messages (AI Legion's targeted bus messages), durable like every other.

An agent's ``send_to_agent`` call queues an outbound message on the internal ``agent``
channel; this channel delivers it by journaling an inbound message for the target agent,
deduplicated by the outbox's idempotency key. The target answers in a session of its own
for that conversation, and its answer travels back the same way as a *reply*; the agent
that receives a reply answers the person who started the exchange. Every message counts as
a hop; past ``max_hops`` nothing more is delivered and that person gets a visible note, so
two agents cannot ping-pong forever.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gateway.config.settings import Settings
from gateway.core.addressing import AGENT_CHANNEL, DEFAULT_AGENT, agent_pair
from gateway.core.channel import StartContext
from gateway.core.messages import (
    ChatRef,
    ChatType,
    InboundMessage,
    OutboundKind,
    OutboundMessage,
    new_id,
)
from gateway.core.principal import Principal
from gateway.runtime.bus import Bus
from gateway.store import AgentConversation, AgentConversations, AuditLog

log = logging.getLogger(__name__)

REQUEST = "agent-request:"
REPLY = "agent-reply:"


@dataclass(frozen=True, slots=True)
class AgentPolicy:
    """Which agents may message which (from settings)."""

    allowed: dict[str, tuple[str, ...]]
    names: tuple[str, ...]

    def may_message(self, sender: str, target: str) -> bool:
        if target not in self.names or target == sender:
            return False
        allowed = self.allowed.get(sender, ())
        return "*" in allowed or target in allowed


def agent_policy(settings: Settings) -> AgentPolicy:
    """Who may message whom, from ``may_message`` and ``agent_messages.main_may_message``."""
    allowed = {DEFAULT_AGENT: tuple(settings.agent_messages.main_may_message)}
    allowed |= {name: profile.may_message for name, profile in settings.agents.items()}
    return AgentPolicy(allowed, (DEFAULT_AGENT, *settings.agents))


def roster(settings: Settings, me: str) -> str:
    """The other agents, a line each with what they do and whether ``me`` may message them
    (for the system prompt: the model learns it here, not from a refusal)."""
    policy = agent_policy(settings)
    lines = []
    for name in policy.names:
        if name == me:
            continue
        profile = settings.agents.get(name)
        if profile is None:
            about = settings.agent_messages.main_description or "the default agent"
        else:
            about = profile.description or (profile.persona.strip().splitlines() or [""])[0]
        reach = "you may message it" if policy.may_message(me, name) else "you may not message it"
        lines.append(f"- {name}: {about.strip().rstrip('.') or 'no description'}. ({reach})")
    if not lines:
        return ""
    return (
        "Other agents on this gateway (send_to_agent asks one or several at once; each "
        "answer comes back to you):\n" + "\n".join(lines)
    )


def is_reply(msg: InboundMessage) -> bool:
    return msg.platform_message_id.startswith(REPLY)


class AgentChannel:
    name = AGENT_CHANNEL

    def __init__(
        self, *, agent_conversations: AgentConversations, audit: AuditLog, bus: Bus, max_hops: int
    ) -> None:
        self._agent_conversations = agent_conversations
        self._audit = audit
        self._bus = bus
        self._max_hops = max_hops

    async def start(self, context: StartContext) -> None:
        return None  # it delivers straight to the bus; nothing arrives from outside

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> str | None:
        sender, target = agent_pair(message.chat_id)
        conversation_id = message.thread_id or ""
        conversation = await self._agent_conversations.get(conversation_id)
        if conversation is None:
            log.warning("agent message %s has no conversation; dropped", message.idempotency_key)
            return None
        hops = await self._agent_conversations.hop(conversation_id)
        if hops > self._max_hops:
            if hops == self._max_hops + 1:  # tell the person once; later sends just stop
                await self._stop_note(conversation, sender, target)
            return None
        kind = REPLY if message.kind in (OutboundKind.REPLY, OutboundKind.NOTICE) else REQUEST
        await self._bus.publish_inbound(
            InboundMessage(
                channel=AGENT_CHANNEL,
                chat_id=message.chat_id,
                thread_id=conversation_id,
                sender_id=sender,
                sender_name=f"agent {sender}",
                text=f"[message from agent {sender}]\n{message.text}",
                platform_message_id=f"{kind}{message.idempotency_key}",
                chat_type=ChatType.DM,
                mentioned=True,
            )
        )
        return f"hop {hops}"

    async def _stop_note(self, conversation: AgentConversation, sender: str, target: str) -> None:
        origin = conversation.origin
        note = OutboundMessage(
            channel=origin.channel,
            chat_id=origin.chat_id,
            thread_id=origin.thread_id,
            text=(
                f"The agents {sender} and {target} stopped talking to each other after "
                f"{self._max_hops} messages (the limit), without a final answer."
            ),
            kind=OutboundKind.NOTICE,
            idempotency_key=f"agent-hop-limit:{conversation.id}",
        )
        await self._audit.record(
            "agent-hop-limit",
            channel=origin.channel,
            conversation=conversation.id,
            sender=sender,
            target=target,
        )
        await self._bus.publish_outbound([note])


class AgentDirectory:
    """The services.AgentDirectory the send_to_agent tool uses."""

    def __init__(self, policy: AgentPolicy, agent_conversations: AgentConversations) -> None:
        self._policy = policy
        self._agent_conversations = agent_conversations

    def may_message(self, sender: str, target: str) -> bool:
        return self._policy.may_message(sender, target)

    def reachable(self, sender: str) -> tuple[str, ...]:
        return tuple(name for name in self._policy.names if self._policy.may_message(sender, name))

    async def open_conversation(
        self,
        *,
        sender: str,
        origin: ChatRef,
        principal: Principal,
        user_texts: tuple[str, ...] = (),
        tainted: bool = False,
    ) -> str:
        conversation_id = new_id()[:12]
        await self._agent_conversations.start(
            conversation_id,
            origin,
            sender,
            principal.record(),
            authorised_by=user_texts,
            tainted=tainted,
        )
        return conversation_id

    async def taint(self, conversation_id: str) -> None:
        await self._agent_conversations.taint(conversation_id)
