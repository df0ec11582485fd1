"""What one turn may touch, what outside content it holds, and whose words are the person's.

Decided in code from the principal and the conversation, never from model output:

- the owner's own chats see the whole workspace;
- an admin's DM sees it without the owner's memory (admins may run commands anyway);
- a member's DM and every group see only the installed skills and the files sent in that
  conversation, so one person's attachment or the owner's documents never reach another
  (nor the assistant's drafts of skills waiting for the owner in ``skills/.proposed/``);
- what others wrote is outside content: files people sent, other people's and groups'
  memory (``memory/people/<x>/`` but the turn's own person's, ``memory/groups/``), and
  in a group everything but the turn itself (the conversation and the group's memory hold
  what all its members wrote), so a group turn is tainted from its start.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agent.llm.types import ChatMessage
from agent.memory import scope_for
from agent.protected import may_change_owner_files
from agent.request import TurnRequest
from agent.skills.library import routed_names
from agent.tools.base import Outside, Tool, TurnState
from agent.web.seen import addresses_in
from agent.workspace import Workspace
from gateway.core.addressing import AGENT_CHANNEL, HOOK_CHANNEL
from gateway.core.messages import Attachment, ChatRef, ChatType

ToolOf = Callable[[str], Tool | None]

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
    scope = scope_for(principal, request.chat)
    if scope.kind == "owner":
        return view
    if scope.kind == "person":  # their own memory is their own words
        view = view.trusting(scope.directory)
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
        return tuple(own_words(m.text) for m in request.messages)
    return (request.prompt,) if request.prompt else ()


def own_words(text: str) -> str:
    """``text`` without its quoted lines (``> …``: what an email reply keeps of the mail it
    answers, a markdown quote): someone else's words, shown for context, never the
    person's own."""
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(">"))


def outside_at_start(request: TurnRequest) -> list[Outside]:
    """The outside content a turn holds from its start: what came with its messages (a
    forward, a quote, a document, the group's recent messages), a group's conversation,
    and the outside content behind a turn another one started (a webhook's payload, a
    task or an agent conversation started after outside content)."""
    found: list[Outside] = []
    if request.principal.chat_type is not ChatType.DM:
        found.append(Outside("this group's conversation, written by all its members"))
    for message in request.messages:
        found += [Outside("a forwarded message", said.author) for said in message.forwarded]
        if message.quote is not None and not message.quote.by_bot:
            found.append(Outside("a quoted message", message.quote.author))
        if message.context:
            found.append(Outside("what others said in this group"))
        found += [
            Outside("a document someone sent", a.filename or a.kind)
            for a in message.attachments
            if a.text is not None or a.page_of is not None
        ]
    if request.tainted:
        if request.principal.channel == HOOK_CHANNEL:
            found.append(Outside("a webhook's payload", request.chat.chat_id))
        elif request.chat.channel == AGENT_CHANNEL:
            found.append(Outside("outside content read earlier in this exchange between agents"))
        else:
            found.append(Outside("outside content read by the turn that started this one"))
    return list(dict.fromkeys(found))


def seen_at_start(request: TurnRequest, messages: Iterable[ChatMessage]) -> set[str]:
    """The web addresses in what the turn was given: the person's own words, and the
    messages it answers (with what they forward or quote) unless the model wrote them
    after outside content (the task of a tainted turn, a message from an agent that read
    some): those may carry what that turn read."""
    texts = list(authorising_texts(request))
    model_written = request.chat.channel == AGENT_CHANNEL or not request.messages
    if not (model_written and request.tainted):
        texts += [m.content for m in messages if m.role == "user"]
    return addresses_in(texts, bare=True)


def resumed_state(
    checkpoints: Sequence[ChatMessage],
    *,
    chat: ChatRef,
    outside: Sequence[Outside] = (),
    seen: Iterable[str] = (),
    tool_of: ToolOf = lambda name: None,
) -> TurnState:
    """A turn's state, rebuilt from its checkpoints (a resumed turn's, after a restart or
    an approval; a new turn's first one): what it already sent to the chat (so the final
    answer is not repeated), what outside content it had read (so the taint guard still
    holds, and approvers are told which), the web addresses it has seen (``seen``, and
    the links in what it read) and the files its answer carries. ``outside``: what it
    held from its start (:func:`outside_at_start`)."""
    results = {m.tool_call_id: m for m in checkpoints if m.role == "tool"}
    calls = {c.id: c for m in checkpoints for c in m.tool_calls}
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
    state = TurnState(sent_texts=sent, seen=set(seen))
    for what in outside:
        state.read(what)
    for message in checkpoints:
        if not message.untrusted:
            continue
        made = calls.get(message.tool_call_id or "")
        tool = tool_of(message.name or "") if message.role == "tool" else None
        if tool is not None and made is not None:
            state.read(tool.read_from(_arguments(made.arguments)))
            if tool.shows_links:
                state.seen |= addresses_in([message.content])
        elif not state.read_untrusted:
            state.read(Outside("outside content that came with a message"))
    state.files = [  # made by tools before the interruption (screenshots); they go with the answer
        Attachment(
            "image", path=image.path, mime_type=image.mime_type, filename=Path(image.path).name
        )
        for message in checkpoints
        if message.role == "tool"
        for image in message.images
    ]
    return state


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
