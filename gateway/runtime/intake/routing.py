"""Which agent answers a message, and in which session.

Routes are tried in order; the first whose every given field matches picks the agent, and
the default agent (``main``) takes the rest. A message from another program (a webhook, the
API) names its agent itself. A session belongs to exactly one agent: its key
is the platform's ``channel:chat[:thread]`` (or, for a person whose direct chats are one
conversation across channels, ``person:<their key>``), prefixed with the agent's name for
every agent but ``main`` (so existing sessions keep their keys). Messages between agents travel on the
internal ``agent`` channel with ``chat_id = "<from>><to>"`` and the conversation id as thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent.agent import Agent
from gateway.config.agents import RouteRule
from gateway.core.addressing import AGENT_CHANNEL, DEFAULT_AGENT, agent_of, agent_pair, qualify
from gateway.core.messages import InboundMessage


class Router:
    def __init__(self, routes: Sequence[RouteRule], agents: Sequence[str]) -> None:
        self._routes = tuple(routes)
        self.agents = (DEFAULT_AGENT, *agents)

    def agent_for(self, msg: InboundMessage) -> str:
        if msg.channel == AGENT_CHANNEL:
            return agent_pair(msg.chat_id)[1]
        if msg.agent is not None and msg.agent in self.agents:  # a webhook's, the API's model
            return msg.agent
        for rule in self._routes:
            if _matches(rule, msg):
                return rule.agent
        return DEFAULT_AGENT

    def session_key(self, msg: InboundMessage) -> str:
        agent = self.agent_for(msg)
        if msg.channel == AGENT_CHANNEL:
            sender, _ = agent_pair(msg.chat_id)
            # One session per agent conversation, on the receiving agent's side.
            return qualify(agent, f"{AGENT_CHANNEL}:{sender}:{msg.thread_id}")
        # a person's direct chats as one conversation, when the access gate said so
        return qualify(agent, msg.conversation or msg.session_key)


def _matches(rule: RouteRule, msg: InboundMessage) -> bool:
    return (
        (rule.channel is None or rule.channel == msg.channel)
        and (rule.chat is None or rule.chat == msg.chat_id)
        and (rule.thread is None or rule.thread == msg.thread_id)
        and (rule.sender is None or rule.sender == msg.sender_id)
        and (rule.mentioned is None or rule.mentioned == msg.mentioned)
    )


def agent_for(agents: Mapping[str, Agent], session_key: str) -> Agent:
    """The agent owning a session (the default agent for one no longer configured)."""
    return agents.get(agent_of(session_key)) or agents[DEFAULT_AGENT]
