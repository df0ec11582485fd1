"""Memory tools: read, write, patch, append and search the current scope's memory.

The scope (owner, one person, one group) comes from the turn's principal, never from the
arguments, so no call can reach another scope's notes. Writes are atomic, and a patch or
an append (read, change, write) holds an exclusive ``flock`` on a lock file beside the note,
so two turns changing the same note at once (two sessions, or two nodes of a cluster sharing
the workspace) both keep their change.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import re
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any, ClassVar

from agent.memory import MemoryScope, scope_for
from agent.tools.base import Effect, Tool, ToolContext, ToolError, ToolResult, schema
from agent.tools.files import write_text_atomic
from gateway.store import History

MEMORY_INTENT = (
    "remember",
    "memory",
    "memorize",
    "memorise",
    "note",
    "save",
    "write down",
    "forget",
    "update",
    "keep in mind",
    "record",
)
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _scope(ctx: ToolContext) -> MemoryScope:
    return scope_for(ctx.principal, ctx.chat)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold the note's lock file (``.<name>.lock`` beside it) while it is changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / f".{path.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
        text = await asyncio.to_thread(_read, path)
        return ToolResult(text or "(empty)")


class MemoryWrite(Tool):
    name = "memory_write"
    description = "Replace all of long-term memory (keep what still matters)."
    parameters = schema({"content": {"type": "string"}}, ("content",))
    effect = Effect.WRITE
    intent = MEMORY_INTENT

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _target(ctx, "memory")
        await asyncio.to_thread(write_text_atomic, path, args["content"].rstrip() + "\n")
        return ToolResult(f"memory saved ({len(args['content'])} characters)")


class MemoryPatch(Tool):
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

        def patch() -> str:
            with _exclusive(path):
                return change()

        def change() -> str:
            text = _read(path)
            count = text.count(args["old_text"])
            if count != 1:
                raise ToolError(
                    f"old_text occurs {count} times in memory; it must occur exactly once"
                )
            write_text_atomic(path, text.replace(args["old_text"], args["new_text"], 1))
            return "memory updated"

        return ToolResult(await asyncio.to_thread(patch))


class MemoryAppend(Tool):
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
        which = args.get("to", "today")
        path = _target(ctx, which)
        stamp = datetime.now().astimezone().strftime("%H:%M")
        line = (
            f"- {stamp} {args['content'].strip()}"
            if which == "today"
            else f"- {args['content'].strip()}"
        )

        def append() -> None:
            with _exclusive(path):
                add()

        def add() -> None:
            text = _read(path)
            if not text and which == "today":
                text = f"# {datetime.now().astimezone().date().isoformat()}\n\n"
            elif text and not text.endswith("\n"):
                text += "\n"
            write_text_atomic(path, text + line + "\n")

        await asyncio.to_thread(append)
        return ToolResult(f"noted in {'today' if which == 'today' else 'memory'}")


class MemorySearch(Tool):
    name = "memory_search"
    description = "Search memory, daily notes and earlier messages of this conversation."
    parameters = schema({"query": {"type": "string", "minLength": 2}}, ("query",))
    max_file_hits: ClassVar[int] = 8

    def __init__(self, history: History) -> None:
        self._history = history

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query: str = args["query"]
        words = [w.lower() for w in re.findall(r"\w+", query) if len(w) > 1]
        scope = _scope(ctx)
        file_hits = await asyncio.to_thread(self._grep_files, ctx.workspace.root, scope, words)
        history_hits = await self._history.search([ctx.session_key], query)
        lines = [f"{where}: {text}" for where, text in file_hits]
        for hit in history_hits:
            when = datetime.fromtimestamp(hit.at).astimezone().strftime("%Y-%m-%d %H:%M")
            lines.append(f"chat {when} ({hit.role}): {hit.snippet}")
        return ToolResult("\n".join(lines) if lines else f"nothing found for {query!r}")

    def _grep_files(
        self, root: Path, scope: MemoryScope, words: list[str]
    ) -> list[tuple[str, str]]:
        files = [root / scope.long_term]
        notes_dir = root / (scope.directory or "memory")
        if notes_dir.is_dir():
            files.extend(sorted(notes_dir.glob("????-??-??.md"), reverse=True))
        hits: list[tuple[str, str]] = []
        for path in files:
            for line in _read(path).splitlines():
                lowered = line.lower()
                if words and any(w in lowered for w in words):
                    hits.append((path.name, line.strip()))
                    if len(hits) >= self.max_file_hits:
                        return hits
        return hits
