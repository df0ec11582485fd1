"""What one turn may touch, and whose words may authorise its side effects.

Decided in code from the principal and the conversation, never from model output:

- the owner's own chats see the whole workspace;
- an admin's DM sees it without the owner's memory (admins may run commands anyway);
- a member's DM and every group see only the installed skills and the files sent in that
  conversation, so one person's attachment or the owner's documents never reach another
  (nor the assistant's drafts of skills waiting for the owner in ``skills/.proposed/``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.llm.types import ChatMessage
from agent.memory import scope_for
from agent.protected import may_change_owner_files
from agent.request import TurnRequest
from agent.skills.library import routed_names
from agent.tools.base import TurnState
from agent.workspace import Workspace
from gateway.core.messages import Attachment, ChatRef, ChatType

OWNER_MEMORY = ("MEMORY.md", "memory/")


def file_view(
    workspace: Workspace,
    request: TurnRequest,
    conversation: Sequence[ChatMessage],
    state: TurnState,
) -> Workspace:
    """The part of the workspace this turn's file tools (and its sandboxed commands) may
    reach, and whether it may change the owner's protected files: decided at each write,
    since reading outside content taints the turn midway."""
    principal = request.principal
    view = workspace.for_turn(
        lambda: may_change_owner_files(principal, tainted=state.read_untrusted)
    )
    if scope_for(principal, request.chat).kind == "owner":
        return view
    if principal.is_admin and principal.chat_type is ChatType.DM:
        return view.narrowed(hide=OWNER_MEMORY)
    sent = [Path(f) for m in conversation if m.role == "user" for f in m.files]
    return view.narrowed(hide=(".",), allow=(*installed_skills(workspace.root / "skills"), *sent))


def installed_skills(folder: Path) -> list[Path]:
    """The skill folders under ``folder``; not the dot-folders (drafts, staging)."""
    try:
        return [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def authorising_texts(request: TurnRequest) -> tuple[str, ...]:
    """The words that may authorise side effects: the user's, never the model's."""
    if request.authorising_texts is not None:
        return request.authorising_texts
    if request.messages:
        return tuple(m.text for m in request.messages)
    return (request.prompt,) if request.prompt else ()


def resumed_state(checkpoints: Sequence[ChatMessage], *, chat: ChatRef, tainted: bool) -> TurnState:
    """A resumed turn's state, rebuilt from its checkpoints: what it already sent to the chat
    (so the final answer is not repeated), whether it had read outside content (so the
    taint guard still holds after a restart) and the files its answer carries."""
    results = {m.tool_call_id: m for m in checkpoints if m.role == "tool"}
    sent: list[str] = []
    for message in checkpoints:
        for call in message.tool_calls:
            result = results.get(call.id)
            if call.name != "message" or result is None or result.is_error:
                continue
            args = _arguments(call.arguments)
            target = (args.get("channel") or chat.channel, args.get("chat_id") or chat.chat_id)
            if target == (chat.channel, chat.chat_id) and args.get("content"):
                sent.append(str(args["content"]))
    untrusted = tainted or any(m.untrusted for m in checkpoints)
    files = [  # made by tools before the interruption (screenshots); they go with the answer
        Attachment(
            "image", path=image.path, mime_type=image.mime_type, filename=Path(image.path).name
        )
        for message in checkpoints
        if message.role == "tool"
        for image in message.images
    ]
    return TurnState(sent_texts=sent, read_untrusted=untrusted, files=files)


def loaded_skills(checkpoints: Sequence[ChatMessage]) -> list[str]:
    """The skills a turn loaded, by a trigger or with ``get_skill``, before it was
    interrupted: their bounds hold again when it resumes, even if they changed since."""
    results = {m.tool_call_id: m for m in checkpoints if m.role == "tool"}
    routed = [name for m in checkpoints if m.role == "user" for name in routed_names(m.content)]
    return routed + [
        str(_arguments(call.arguments).get("name", ""))
        for message in checkpoints
        for call in message.tool_calls
        if call.name == "get_skill"
        and (result := results.get(call.id)) is not None
        and not result.is_error
    ]


def _arguments(raw: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
