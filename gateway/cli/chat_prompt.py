"""Reading what the user types into ``switchboard chat``.

At a terminal: prompt_toolkit, with line editing, a history kept across sessions
(``data_dir/chat_history``, mode 0600: it holds what was typed), multi-line input (Alt-Enter
or a trailing backslash starts a new line; pasted text keeps its lines) and completion of
the ``/`` commands. From a pipe: plain lines.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout

from gateway.core.commands import COMMANDS

LEAVE = ("/exit", "/quit", "exit", "quit")
LOCAL_COMMANDS = {"/exit": "leave the chat (Ctrl-D works too)"}
HISTORY_FILE = "chat_history"


class SlashCompleter(Completer):
    """Completes a ``/`` command typed at the start of the input."""

    def __init__(self, commands: dict[str, str]) -> None:
        self._commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(ch.isspace() for ch in typed):
            return
        for name, meaning in self._commands.items():
            if name.startswith(typed.lower()):
                yield Completion(name, start_position=-len(typed), display_meta=meaning)


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter")
    def _send_or_continue(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _clear_or_leave(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=EOFError())

    return keys


def history_file(data_dir: Path) -> Path:
    path = data_dir / HISTORY_FILE
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    return path


class PromptReader:
    """Input at a terminal. :meth:`read` returns None when the user leaves (Ctrl-D)."""

    def __init__(self, data_dir: Path) -> None:
        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history_file(data_dir))),
            completer=SlashCompleter(COMMANDS | LOCAL_COMMANDS),
            complete_while_typing=True,
            key_bindings=_bindings(),
            multiline=True,
            prompt_continuation="   … ",
            enable_history_search=False,
        )

    async def read(self) -> str | None:
        try:
            with patch_stdout(raw=True):  # messages arriving meanwhile print above the prompt
                return await self._session.prompt_async(
                    HTML("<b><ansigreen>you›</ansigreen></b> "), handle_sigint=False
                )
        except EOFError:
            return None


class LineReader:
    """Input from a pipe: one message per line."""

    def __init__(self) -> None:
        self._reader: asyncio.StreamReader | None = None
        self._file = stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode)  # `< file`: no pipe

    async def read(self) -> str | None:
        if self._file:
            return await asyncio.to_thread(sys.stdin.readline) or None
        if self._reader is None:
            loop = asyncio.get_running_loop()
            self._reader = asyncio.StreamReader()
            protocol = asyncio.StreamReaderProtocol(self._reader)
            await loop.connect_read_pipe(lambda: protocol, sys.stdin)
        line = await self._reader.readline()
        return line.decode("utf-8", errors="replace") if line else None
