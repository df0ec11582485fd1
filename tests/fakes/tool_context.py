"""A ToolContext for calling one tool directly, outside a turn."""

from __future__ import annotations

from agent.tools.base import ToolContext, TurnState
from agent.workspace import Workspace
from gateway.core.messages import ChatRef, OutboundMessage
from gateway.core.principal import Principal


async def _no_sends(message: OutboundMessage) -> None:
    raise AssertionError(f"no sends expected, got {message!r}")


def tool_context(workspace: Workspace) -> ToolContext:
    """The context of a plain test user's turn in ``test:1``; sending fails the test."""
    return ToolContext(
        turn_id="t1",
        call_id="c1",
        session_key="test:1",
        chat=ChatRef("test", "1"),
        principal=Principal("test", "u1"),
        workspace=workspace,
        send=_no_sends,
        state=TurnState(),
    )
