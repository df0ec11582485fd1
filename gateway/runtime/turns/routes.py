"""Where a chat turn's answer goes, as whom it acts, and whose words authorise its effects.

A person's message is answered in its own chat, as that person. A message from another
agent (the internal agent channel) acts for the person who started the exchange, never for
the other agent: a request is answered back to the agent that sent it; a reply is turned
into an answer for that person, in their chat, and recorded in their session. A message
from another program (a webhook, the API) is routed as its configuration says
(gateway/runtime/programs.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from gateway.config.channels import ChannelSection
from gateway.core.addressing import (
    AGENT_CHANNEL,
    PROGRAM_CHANNELS,
    agent_chat,
    agent_pair,
    qualify,
)
from gateway.core.messages import ChatRef, InboundMessage
from gateway.core.principal import Principal
from gateway.runtime.agents.agent_channel import is_reply
from gateway.runtime.intake.access import principal_for
from gateway.store import AgentConversations


@dataclass(frozen=True, slots=True)
class Route:
    """``authorising_texts``: ``None`` means the messages' own authors (a person's chat).
    ``record_in``: another session whose history also records the answer."""

    chat: ChatRef
    principal: Principal
    record_in: str | None = None
    authorising_texts: tuple[str, ...] | None = None
    tainted: bool = False


# Another program's message (a webhook, the API: PROGRAM_CHANNELS): where its answer goes,
# as whom the turn acts, whose words authorise it.
ProgramRoute = Callable[[InboundMessage, str], Awaitable[Route]]


class Routes:
    def __init__(
        self,
        agent_conversations: AgentConversations,
        sections: Mapping[str, ChannelSection],
        programs: ProgramRoute,
    ) -> None:
        self._agent_conversations = agent_conversations
        self._sections = sections  # who is owner or admin where
        self._programs = programs

    async def of(self, message: InboundMessage, agent: str) -> Route:
        """The route of a turn whose last message is ``message``, run by ``agent``."""
        if message.channel in PROGRAM_CHANNELS:
            return await self._programs(message, agent)
        if message.channel != AGENT_CHANNEL:
            return Route(message.chat, principal_for(message, self._sections.get(message.channel)))
        return await self._between_agents(message, agent)

    async def _between_agents(self, msg: InboundMessage, me: str) -> Route:
        conversation = await self._agent_conversations.get(msg.thread_id or "")
        sender, _ = agent_pair(msg.chat_id)
        back_to_sender = ChatRef(AGENT_CHANNEL, agent_chat(me, sender), msg.thread_id)
        if conversation is None:  # unknown conversation: answer nobody but the sender
            return Route(
                back_to_sender,
                Principal(AGENT_CHANNEL, sender),
                authorising_texts=(),
                tainted=True,
            )
        principal = Principal.from_record(conversation.principal)
        said, tainted = conversation.authorised_by, conversation.tainted
        if is_reply(msg):
            record_in = qualify(me, conversation.origin.session_key)
            return Route(conversation.origin, principal, record_in, said, tainted)
        return Route(back_to_sender, principal, None, said, tainted)
