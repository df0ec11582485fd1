"""Post-task reflection (Pegasus): after a non-trivial turn, update memory in the background.

The model gets the finished exchange and the scope's current memory, and may call only the
memory write tools, for a few rounds. It never affects the answer (the reply is already
committed), it is skipped for trivial turns and for turns that read untrusted content (a
poisoned page must not become a lasting memory), and its failures are only logged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from agent.compaction import render_transcript
from agent.guards.parser import decode_arguments
from agent.guards.review import is_review
from agent.llm.metered import Charge, MeteredModel
from agent.llm.types import ChatMessage, SystemPrompt
from agent.tools.base import ToolContext, ToolResult
from agent.tools.executor import ToolExecutor
from agent.turn.loop import tool_message
from gateway.core.usage import Purpose

log = logging.getLogger(__name__)

REFLECTION_TOOLS = ("memory_write", "memory_patch", "memory_append")
MAX_ROUNDS = 3

PROMPT = """\
You just finished the exchange below. Decide whether anything in it is worth remembering \
long term: facts about the user, preferences, decisions, ongoing tasks, lessons about how to \
do something. If so, record it with the memory tools (append short lines; patch outdated \
facts; rewrite only if memory is a mess). If nothing is worth keeping, reply DONE without \
calling a tool. Never store secrets or passwords.

Current memory:
{memory}

Exchange:
{transcript}"""


def current_exchange(conversation: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages of the turn that just ended: from the person's first message of it on,
    without the review stage's requests for a fix (they are ours, not the person's)."""
    start = len(conversation)
    for index in range(len(conversation) - 1, -1, -1):
        message = conversation[index]
        if message.role == "user":
            if not is_review(message):
                start = index
        elif start < len(conversation) and message.role == "assistant" and not message.tool_calls:
            break  # the answer of the turn before
    return [m for m in conversation[start:] if not is_review(m)]


# The person asks for something to be kept ("remember that ...", "merk dir ..."), in the
# four languages the claims rules read (agent/guards/claims.py).
ASKED_TO_REMEMBER = re.compile(
    r"\b(remember|don'?t forget|do not forget|keep in mind|make a note|note (that|this|down)|"
    r"merk (dir|euch)|merken sie|vergiss nicht|vergessen sie nicht|notier|"
    r"recuerda|no olvides|apunta|ten en cuenta|"
    r"souviens|rappelle-toi|retiens|n'oublie pas|note que)\b",
    re.IGNORECASE,
)


def worth_reflecting(exchange: Sequence[ChatMessage], *, tainted: bool) -> bool:
    """Whether the turn's own exchange (:func:`current_exchange`) may hold something to
    keep: a long one, one with work done (two tool calls or more in this turn: the ones of
    earlier turns were looked at after those), or one where the person asked for something
    to be remembered and the turn wrote no memory (an answer of "I'll remember that" keeps
    nothing by itself). A short message after a busy conversation costs no extra call."""
    if tainted:
        return False
    said = [m.content for m in exchange if m.role == "user"]
    calls = [call.name for m in exchange if m.role == "assistant" for call in m.tool_calls]
    if len(calls) >= 2 or sum(map(len, said)) >= 300:
        return True
    wrote = any(name in REFLECTION_TOOLS for name in calls)
    return not wrote and any(ASKED_TO_REMEMBER.search(text) for text in said)


async def reflect(
    *,
    model: MeteredModel,
    executor: ToolExecutor,
    transcript: Sequence[ChatMessage],
    memory: str,
    context_for: Callable[[str], ToolContext],
    charge: Charge,
) -> int:
    """Run the reflection rounds; returns how many memory calls were made. Its model calls
    are charged to ``charge`` (the person of the turn, recorded on their own)."""
    tools = tuple(spec for spec in executor.registry.specs(REFLECTION_TOOLS))
    if not tools:
        return 0
    prompt = PROMPT.format(memory=memory or "(empty)", transcript=render_transcript(transcript))
    conversation: list[ChatMessage] = [ChatMessage("user", prompt)]
    system = SystemPrompt("You maintain the assistant's long-term memory. Be brief and factual.")
    made = 0
    for round_number in range(MAX_ROUNDS):
        response = await model.ask(
            system, conversation, tools, purpose=Purpose.REFLECTION, charge=charge
        )
        if not response.tool_calls:
            break
        conversation.append(response.as_message())
        for call in response.tool_calls:
            args, error, _ = decode_arguments(call.arguments)
            result: ToolResult
            checked = executor.check(call.name, args or {}) if args is not None else None
            if (
                args is None
                or checked is None
                or isinstance(checked, ToolResult)
                or call.name not in REFLECTION_TOOLS
            ):
                result = ToolResult.error(error or f"{call.name} is not available here")
            else:
                result = await executor.run(
                    checked, args, context_for(f"r{round_number}-{call.id}")
                )
                made += 1
            conversation.append(tool_message(call, result))
    return made
