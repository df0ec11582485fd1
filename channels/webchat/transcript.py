"""What each browser's chat showed: the web chat's own message store.

For other channels the platform keeps the conversation; here this does. One JSONL file per
chat under ``data_dir/channels/webchat/``; an entry is written (and fsynced) before
``send`` returns, so a reply the outbox marked delivered survives a crash and shows again
after a reload. Entries are keyed, so a retried delivery or a re-posted message is stored
once. The newest entries of each open chat are kept in memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# "owner": every signed-in browser's one chat; 24 hex digits: a browser's own chat before
# browsers shared it (kept readable for answers still on their way there)
CHAT_ID_RE = re.compile(r"owner|[0-9a-f]{24}")
KEEP_ENTRIES = 500  # in memory and after compaction
COMPACT_AFTER_LINES = 2_000

Entry = dict[str, Any]


def entry_id(key: str) -> str:
    """A short, URL-safe id for an entry's logical key."""
    return hashlib.sha256(key.encode()).hexdigest()[:20]


@dataclass(slots=True)
class ChatLog:
    entries: deque[Entry] = field(default_factory=lambda: deque(maxlen=KEEP_ENTRIES))
    ids: set[str] = field(default_factory=set)
    lines: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def find(self, entry: str) -> Entry | None:
        return next((e for e in self.entries if e["id"] == entry), None)


class Transcripts:
    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._chats: dict[str, ChatLog] = {}
        self._loading: dict[str, asyncio.Lock] = {}

    def path(self, chat_id: str) -> Path:
        if not CHAT_ID_RE.fullmatch(chat_id):
            raise ValueError(f"not a web chat id: {chat_id!r}")
        return self._directory / f"{chat_id}.jsonl"

    async def load(self, chat_id: str) -> ChatLog:
        chat = self._chats.get(chat_id)
        if chat is not None:
            return chat
        async with self._loading.setdefault(chat_id, asyncio.Lock()):
            chat = self._chats.get(chat_id)
            if chat is None:
                chat = await asyncio.to_thread(self._read, self.path(chat_id))
                self._chats[chat_id] = chat
        return chat

    def cached(self, chat_id: str) -> ChatLog | None:
        return self._chats.get(chat_id)

    async def append(self, chat_id: str, entry: Entry) -> bool:
        """Store ``entry``; False when an entry with its id is already there."""
        chat = await self.load(chat_id)
        async with chat.lock:
            if entry["id"] in chat.ids:
                return False
            path = self.path(chat_id)
            await asyncio.to_thread(_append_line, path, json.dumps(entry, ensure_ascii=False))
            chat.entries.append(entry)
            chat.ids.add(entry["id"])
            chat.lines += 1
            if chat.lines > COMPACT_AFTER_LINES:
                await asyncio.to_thread(_rewrite, path, list(chat.entries))
                chat.lines = len(chat.entries)
        return True

    @staticmethod
    def _read(path: Path) -> ChatLog:
        chat = ChatLog()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return chat
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a crash
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                chat.lines += 1
                if entry["id"] not in chat.ids:
                    chat.entries.append(entry)
                    chat.ids.add(entry["id"])
        return chat


def _append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _rewrite(path: Path, entries: list[Entry]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for entry in entries:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
