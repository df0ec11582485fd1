"""Slash commands answered by the gateway itself, without a model call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.messages import InboundMessage
from gateway.store import History

StatusReport = Callable[[InboundMessage], Awaitable[str]]

COMMANDS = {
    "/start": "say hello",
    "/help": "list commands",
    "/new": "start a fresh conversation (history stays on disk)",
    "/status": "show what the gateway is doing",
}


class Commands:
    def __init__(self, *, agent_name: str, history: History, status: StatusReport) -> None:
        self._name = agent_name
        self._history = history
        self._status = status

    def handles(self, msg: InboundMessage) -> bool:
        return msg.command in COMMANDS

    async def run(self, msg: InboundMessage) -> str:
        command = msg.command
        if command == "/new":
            await self._history.new_generation(msg.session_key)
            return "Started a fresh conversation. Earlier messages are kept on disk but no longer in my context."
        if command == "/status":
            return await self._status(msg)
        listing = "\n".join(f"{name} - {text}" for name, text in COMMANDS.items())
        if command == "/start":
            return f"Hi, I'm {self._name}. Just write to me like you would to a colleague.\n\n{listing}"
        return listing
