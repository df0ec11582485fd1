"""Memory tools: read, write, patch, append and search the current scope's memory.

The scope (owner, one person, one group) comes from the turn's principal, never from the
arguments, so no call can reach another scope's notes. Writes are atomic, and a patch or
an append (read, change, write) holds an exclusive ``flock`` on a lock file beside the note
(:func:`agent.memory.exclusive`). Each line a tool writes is recorded with where it came
from (gateway/store/memory_entries.py); ``memory_search`` shows it.

``memory_search`` searches the scope's memory files and the past conversations the caller
may see (:mod:`agent.recall.search`), by words and by meaning. What it finds that another
person wrote (a group's messages, another person's chat when the owner searches
everywhere, a line another person's turn or outside content put in memory, a message that
carried a forward or a quote, an answer written after its turn read outside content) is
outside content: the result is marked so and taints the turn, as a web page does. Every
owner identity's words are the owner's (recall's own rule, :func:`agent.memory.person_recall`).

After outside content a write waits for approval (agent.policy), except in a group's own
memory from a group's turn: every turn that reads that memory treats it as outside content
already (a group's turns are tainted from their start, and others read it as a group's
memory), so a write there cannot carry instructions to a turn that would follow them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

from agent.memory import (
    MemoryScope,
    append_note,
    exclusive,
    person_recall,
    read_note,
    scope_for,
)
from agent.recall.search import SEARCH_TOOL, Found, Recaller, visible_sessions
from agent.tools.base import Effect, Outside, Tool, ToolContext, ToolError, ToolResult, schema
from agent.tools.files import write_text_atomic
from agent.untrusted import wrap_untrusted
from gateway.core.addressing import PERSON_CHANNEL, chat_of
from gateway.core.messages import ChatType
from gateway.core.text.textutil import shown_name, written_lines
from gateway.store import MemoryEntries, Origin, People, Said

# Words of a request to remember: a hint for the approver (agent.policy), no more.
MEMORY_INTENT = ("remember", "memorize", "memorise", "save", "write down", "forget", "keep in mind")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _scope(ctx: ToolContext) -> MemoryScope:
    return scope_for(ctx.principal, ctx.chat)


def _origin(ctx: ToolContext) -> Origin:
    """Where what this call writes comes from: the turn, its person and chat, and whether
    it had read outside content."""
    return Origin(
        person=ctx.principal.person,
        channel=ctx.chat.channel,
        chat_id=ctx.chat.chat_id,
        turn_id=ctx.turn_id,
        at=time.time(),
        outside=ctx.state.read_untrusted,
    )


class _Writes(Tool):
    """A memory tool that writes: records where each new line came from."""

    does = "changes memory"

    def __init__(self, entries: MemoryEntries | None = None) -> None:
        self._entries = entries

    def guarded_action(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        return None if _scope(ctx).kind == "group" else self.does

    async def _record(self, ctx: ToolContext, path: Path, lines: Sequence[str]) -> None:
        if self._entries is not None and lines:
            relative = str(path.relative_to(ctx.workspace.root))
            await self._entries.record(ctx.agent, relative, lines, _origin(ctx))


def _new_lines(before: str, after: str) -> list[str]:
    old = set(before.splitlines())
    return [line for line in after.splitlines() if line.strip() and line not in old]


def _target(ctx: ToolContext, which: str) -> Path:
    scope = _scope(ctx)
    if which in ("", "memory"):
        return ctx.workspace.root / scope.long_term
    if which == "today":
        return ctx.workspace.root / scope.daily(datetime.now().astimezone().date())
    if _DAY.match(which):
        return ctx.workspace.root / scope.daily(date.fromisoformat(which))
    raise ToolError("which must be 'memory', 'today' or a date like 2026-01-31")


class MemoryRead(Tool):
    name = "memory_read"
    description = "Read long-term memory, or the daily note of 'today' or a date (YYYY-MM-DD)."
    parameters = schema({"which": {"type": "string"}})

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _target(ctx, args.get("which", "memory"))
        text = await asyncio.to_thread(read_note, path)
        return ToolResult(text or "(empty)")


class MemoryWrite(_Writes):
    name = "memory_write"
    description = "Replace all of long-term memory (keep what still matters)."
    parameters = schema({"content": {"type": "string"}}, ("content",))
    effect = Effect.WRITE
    intent = MEMORY_INTENT

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _target(ctx, "memory")
        content = args["content"].rstrip() + "\n"

        def write() -> str:
            with exclusive(path):
                before = read_note(path)
                write_text_atomic(path, content)
            return before

        before = await asyncio.to_thread(write)
        await self._record(ctx, path, _new_lines(before, content))
        return ToolResult(f"memory saved ({len(args['content'])} characters)")


class MemoryPatch(_Writes):
    name = "memory_patch"
    description = "Replace one exact passage of long-term memory."
    parameters = schema(
        {"old_text": {"type": "string", "minLength": 1}, "new_text": {"type": "string"}},
        ("old_text", "new_text"),
    )
    effect = Effect.WRITE
    intent = MEMORY_INTENT

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _target(ctx, "memory")

        def patch() -> list[str]:
            with exclusive(path):
                text = read_note(path)
                count = text.count(args["old_text"])
                if count != 1:
                    raise ToolError(
                        f"old_text occurs {count} times in memory; it must occur exactly once"
                    )
                changed = text.replace(args["old_text"], args["new_text"], 1)
                write_text_atomic(path, changed)
            return _new_lines(text, changed)

        await self._record(ctx, path, await asyncio.to_thread(patch))
        return ToolResult("memory updated")


class MemoryAppend(_Writes):
    name = "memory_append"
    description = "Add a line to today's note, or to long-term memory (to=memory)."
    parameters = schema(
        {
            "content": {"type": "string", "minLength": 1},
            "to": {"type": "string", "enum": ["today", "memory"]},
        },
        ("content",),
    )
    effect = Effect.WRITE
    intent = MEMORY_INTENT
    repeatable = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        to: Literal["today", "memory"] = "memory" if args.get("to") == "memory" else "today"
        now = datetime.now().astimezone()
        relative, lines = await asyncio.to_thread(
            append_note, ctx.workspace.root, _scope(ctx), [args["content"]], to=to, now=now
        )
        await self._record(ctx, ctx.workspace.root / relative, lines)
        return ToolResult(f"noted in {to}")


class MemorySearch(Tool):
    name = SEARCH_TOOL
    description = (
        "Search memory, daily notes and past conversations (yours and the groups you are in), "
        "by words and by meaning: ask in any words. The owner may set everywhere=true in "
        "their own direct chat to search every conversation."
    )
    parameters = schema(
        {"query": {"type": "string", "minLength": 2}, "everywhere": {"type": "boolean"}},
        ("query",),
    )
    max_hits: ClassVar[int] = 8

    def __init__(
        self,
        recaller: Recaller,
        entries: MemoryEntries | None = None,
        people: People | None = None,
    ) -> None:
        self._recaller = recaller
        self._entries = entries
        self._people = people  # the names people write under, to say who said a hit

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query: str = args["query"]
        everywhere = bool(args.get("everywhere"))
        if everywhere and not (ctx.principal.is_owner and ctx.principal.chat_type is ChatType.DM):
            raise ToolError("only the owner, in their own direct chat, may search everywhere")
        scope = _scope(ctx)
        entries = await asyncio.to_thread(_entries, ctx.workspace.root, scope)
        sessions = await visible_sessions(
            self._recaller.recall,
            agent=ctx.agent,
            principal=ctx.principal,
            chat=ctx.chat,
            session_key=ctx.session_key,
            everywhere=everywhere,
        )
        searched = await self._recaller.search(
            query, sessions=sessions, entries=entries, limit=self.max_hits
        )
        origins = {}
        files = [(f.path, f.text) for f in searched.found if f.path is not None]
        if self._entries is not None and files:
            origins = await self._entries.origins(ctx.agent, files)
        names = await self._names(searched.found, origins)
        # a hit's further lines indented: never taken for hits of their own
        lines = [_shown(hit, origins, ctx, names).replace("\n", "\n    ") for hit in searched.found]
        if not lines:
            return ToolResult(f"nothing found for {query!r}")
        if not searched.by_meaning:
            lines.append(f"(searched by words only: {searched.why_words_only})")
        body = "\n".join(lines)
        if any(_by_others(hit, origins, ctx) for hit in searched.found):
            # what another person wrote: data for the answer, never instructions
            return ToolResult(wrap_untrusted(f"memory search for {query!r}", body), untrusted=True)
        return ToolResult(body)

    def read_from(self, args: dict[str, Any]) -> Outside:
        return Outside(
            "other people's words or answers given after outside content, found by memory_search",
            str(args.get("query", "")),
        )

    async def _names(
        self, found: Sequence[Found], origins: dict[tuple[str, str], Origin]
    ) -> dict[str, str]:
        """The names on record of the people the hits name (who wrote a memory line, whose
        direct chat a message is in)."""
        persons = {origin.person for origin in origins.values()}
        for hit in found:
            kind, _, whose = _scope_of(hit.said) if hit.said is not None else ("", "", "")
            if kind == "person":
                persons.add(whose)
        if self._people is None or not persons:
            return {}
        return await self._people.names(sorted(persons))


def _entries(root: Path, scope: MemoryScope) -> list[tuple[str, str]]:
    """The scope's memory entries: the lines of its long-term memory and daily notes
    (newest first), headings, comments and blank lines left out."""
    files = [scope.long_term]
    base = scope.directory or "memory"
    notes = root / base
    if notes.is_dir():
        files.extend(f"{base}/{p.name}" for p in sorted(notes.glob("????-??-??.md"), reverse=True))
    return [
        (relative, line) for relative in files for line in written_lines(read_note(root / relative))
    ]


def _by_others(hit: Found, origins: dict[tuple[str, str], Origin], ctx: ToolContext) -> bool:
    """Whether a hit is text someone other than this turn's person wrote (or that came
    from outside content): a group's message (whoever in the group said it, and the
    answers given there), another person's conversation, a message that carried a forward
    or a quote, an answer written after reading outside content, a memory line another
    person's turn or outside content put there. Whose a hit is follows recall's rule
    (:func:`agent.memory.person_recall`): every owner identity's words are the owner's."""
    owner = _scope(ctx).kind == "owner"
    mine = person_recall(ctx.principal.person, owner=owner)
    if hit.said is None:
        origin = origins.get((hit.path or "", hit.text))
        # the line is in this turn's memory: in the owner's, only owner turns write
        # (agent.memory.scope_for)
        return origin is not None and (
            origin.outside or person_recall(origin.person, owner=owner) != mine
        )
    said = hit.said
    whose = (said.scope or "").partition("|")[2]
    if said.outside or whose.startswith("group:"):
        return True
    return bool(whose) and whose != mine


def _when(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().strftime("%-d %b %Y %H:%M")


def _scope_of(said: Said) -> tuple[str, str, str]:
    """The kind of a message's conversation ("owner", "person", "group"; "" unknown) and
    whose: ``(kind, ":", "<channel>:<id>")``."""
    return (said.scope or "").partition("|")[2].partition(":")


def _person(person: str, names: dict[str, str]) -> str:
    """``telegram:111`` as approvals name a person: ``Ann (telegram user 111)`` (the
    address alone when no name is on record)."""
    name = names.get(person)
    channel, _, sender = person.partition(":")
    return f"{shown_name(name)} ({channel} user {sender})" if name else person


def _shown(
    hit: Found, origins: dict[tuple[str, str], Origin], ctx: ToolContext, names: dict[str, str]
) -> str:
    """One hit, saying what it is: a memory entry and where it came from, or who said it,
    where and when."""
    if hit.said is None:
        assert hit.path is not None
        origin = origins.get((hit.path, hit.text))
        if origin is None:
            return f"{hit.path}: {hit.text}"
        chat = f"{origin.channel}:{origin.chat_id}"
        where = "" if chat == origin.person else f" in {chat}"  # not twice for a direct chat
        came = f"from {_person(origin.person, names)}{where}, {_when(origin.at)}"
        if origin.outside:
            came += ", after reading outside content"
        return f"{hit.path}: {hit.text} ({came})"
    said = hit.said
    kind, _, whose = _scope_of(said)
    when = _when(said.at)
    if said.outside and said.role == "assistant":
        when += ", after reading outside content"
    here = " (this chat)" if said.session_key == ctx.session_key else ""
    if kind == "group":
        channel, _, chat = whose.partition(":")
        place = f"in the group {chat} on {channel}{here}, {when}"
        return f"I said {place}: {hit.text}" if said.role == "assistant" else f"{place}: {hit.text}"
    channel = chat_of(said.session_key).partition(":")[0]
    shared = channel == PERSON_CHANNEL  # one conversation across their direct chats
    if kind == "person" and whose != ctx.principal.person:  # the owner, searching everywhere
        who = _person(whose, names)
        who = f"I said to {who}" if said.role == "assistant" else f"{who} said"
        where = "across their direct chats" if shared else f"in their direct chat on {channel}"
        return f"{who} {where}, {when}: {hit.text}"
    who = "I said" if said.role == "assistant" else "you said"
    where = "in our conversation across your chats" if shared else f"on {channel}"
    return f"{who} {where}{here}, {when}: {hit.text}"
