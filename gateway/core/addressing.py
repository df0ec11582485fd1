"""How sessions and agents are named: the pure helpers routing and the agent's tools share.

A session key is the platform's ``channel:chat[:thread]``, prefixed with the agent's name for
every agent but ``main`` (so existing sessions keep their keys). Messages between agents
travel on the internal ``agent`` channel with ``chat_id = "<from>><to>"``.
"""

from __future__ import annotations

DEFAULT_AGENT = "main"
AGENT_CHANNEL = "agent"  # messages between agents
SYSTEM_CHANNEL = "system"  # internal messages: background task results
TASK_CHANNEL = "task"  # where a task submitted through the API sends its notes and answer
HOOK_CHANNEL = "hook"  # signed webhooks (channels/hooks); chat: the hook's name
API_CHANNEL = "api"  # the OpenAI-compatible API (channels/api); chat: the token's name
# One person's direct chats on every channel as one conversation (session.scope = "person"):
# its session key is "person:<the person's key>"; answers go to each message's own chat.
PERSON_CHANNEL = "person"
# Chats on this machine (the terminal, the web chat): they reach the owner only while open.
LOCAL_CHANNELS = frozenset({"terminal", "webchat"})
INTERNAL_CHANNELS = frozenset({AGENT_CHANNEL, SYSTEM_CHANNEL, TASK_CHANNEL})
# Other programs (webhooks, the API): their turns act as configured, never as a person's chat.
PROGRAM_CHANNELS = frozenset({HOOK_CHANNEL, API_CHANNEL})
SEPARATOR = "/"


def qualify(agent: str, session_key: str) -> str:
    return session_key if agent == DEFAULT_AGENT else f"{agent}{SEPARATOR}{session_key}"


def agent_of(session_key: str) -> str:
    """The agent a (qualified) session key belongs to."""
    head, sep, _ = session_key.partition(SEPARATOR)
    return head if sep and ":" not in head else DEFAULT_AGENT


def person_conversation(person: str) -> str:
    """The session key of ``person``'s one conversation across their direct chats."""
    return f"{PERSON_CHANNEL}:{person}"


def chat_of(session_key: str) -> str:
    """A (qualified) session key without its agent: ``channel:chat[:thread]``."""
    head, sep, rest = session_key.partition(SEPARATOR)
    return rest if sep and ":" not in head else session_key


def agent_chat(sender: str, target: str) -> str:
    return f"{sender}>{target}"


def agent_pair(chat_id: str) -> tuple[str, str]:
    """(sender, target) of an agent-channel chat id."""
    sender, _, target = chat_id.partition(">")
    return sender, target
