"""Reading what the user types into ``switchboard chat``.

At a terminal: one prompt_toolkit prompt stays open for the whole chat, so the person can
type (a next message, ``/stop``, Ctrl-C) while an answer streams. The answer streams in the
live region the prompt draws above its input line; messages, notes and finished answers
print above it (:class:`AbovePrompt`). Line editing, a history kept across sessions
(``data_dir/chat_history``, mode 0600: it holds what was typed), multi-line input (Alt-Enter
or a trailing backslash starts a new line; pasted text keeps its lines) and completion of
the ``/`` commands. From a pipe: plain lines, one message at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterable
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import Self, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application, get_app
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, HTML, AnyFormattedText, merge_formatted_text
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from gateway.cli.chat.view import CONTINUATION
from gateway.core.commands import COMMANDS

LEAVE = ("/exit", "/quit", "exit", "quit")
LOCAL_COMMANDS = {"/exit": "leave the chat (Ctrl-D works too)"}
HISTORY_FILE = "chat_history"
YOU = HTML("<b><ansigreen>you›</ansigreen></b> ")


class Key(Enum):
    """A key the chat acts on itself, rather than text to send."""

    CTRL_C = "ctrl-c"  # on an empty line: stop the running turn, or leave when none runs


Typed = str | Key | None  # a message, a key, or None: leave (Ctrl-D on an empty line)


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


@Condition
def _empty() -> bool:
    return not get_app().current_buffer.text


def _bindings(typed: Callable[[Typed], None]) -> KeyBindings:
    """The chat's keys; what they produce goes to ``typed`` (the prompt stays open)."""
    keys = KeyBindings()

    @keys.add("enter")
    def _send_or_continue(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            text = buffer.text
            buffer.reset(append_to_history=True)
            typed(text)

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _clear_or_interrupt(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            typed(Key.CTRL_C)

    @keys.add("c-d", filter=_empty)
    def _leave(event: KeyPressEvent) -> None:
        typed(None)

    return keys


def history_file(data_dir: Path) -> Path:
    path = data_dir / HISTORY_FILE
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    return path


class AbovePrompt(io.TextIOBase):
    """``sys.stdout`` and ``sys.stderr`` while the prompt is open: each whole line written
    prints above the prompt, which then draws itself again below it.

    Unlike prompt_toolkit's ``patch_stdout`` (``run_in_terminal``), the terminal stays in raw
    mode meanwhile: there, a Ctrl-C pressed just as a line prints would be a signal rather
    than a key, a Ctrl-D would be lost, and keys typed would be echoed into the output."""

    def __init__(self, app: Application[str], out: TextIO) -> None:
        self._app = app
        self._out = out  # the terminal, where lines go while the prompt is not drawn
        self._partial = ""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def write(self, text: str) -> int:
        if threading.get_ident() != self._thread:  # the prompt is drawn by the loop's thread
            self._loop.call_soon_threadsafe(self.write, text)
            return len(text)
        lines, newline, self._partial = (self._partial + text).rpartition("\n")
        if newline:
            self._print(lines + newline)
        return len(text)

    def isatty(self) -> bool:
        return self._out.isatty()

    def fileno(self) -> int:
        return self._out.fileno()

    def _print(self, text: str) -> None:
        app = self._app
        if not app.is_running:
            self._out.write(text)
            self._out.flush()
            return
        app.renderer.erase()  # the cursor goes back to where the prompt starts
        app.output.write_raw(text)
        app.output.flush()
        app.renderer.request_absolute_cursor_position()  # how much room is below, now
        app.invalidate()  # the prompt draws again, under the text


class PromptReader:
    """Input at a terminal: a prompt open while the block runs (``async with reader``).

    ``above(width, height)`` is what to draw above the input line (ANSI text ending in a
    newline, or ""): the live region of the answer being written. :meth:`redraw` draws it
    again."""

    def __init__(self, data_dir: Path, above: Callable[[int, int], str]) -> None:
        self._above = above
        self._typed: asyncio.Queue[Typed] = asyncio.Queue()
        self._session: PromptSession[str] = PromptSession(
            self._message,
            history=FileHistory(str(history_file(data_dir))),
            completer=SlashCompleter(COMMANDS | LOCAL_COMMANDS),
            complete_while_typing=True,
            key_bindings=_bindings(self._typed.put_nowait),
            multiline=True,
            prompt_continuation=CONTINUATION,
            enable_history_search=False,
            erase_when_done=True,  # on leaving, no prompt (or live region) stays behind
        )
        self._prompt: asyncio.Task[str] | None = None
        self._redirected = contextlib.ExitStack()

    async def __aenter__(self) -> Self:
        app = self._session.app
        self._redirected.enter_context(contextlib.redirect_stdout(AbovePrompt(app, sys.stdout)))
        self._redirected.enter_context(contextlib.redirect_stderr(AbovePrompt(app, sys.stderr)))
        self._prompt = asyncio.create_task(self._session.prompt_async(handle_sigint=False))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        prompt, self._prompt = self._prompt, None
        try:
            if prompt is not None:
                app = self._session.app
                if app.is_running and app.future is not None and not app.future.done():
                    app.exit(result="")
                else:  # not started yet
                    prompt.cancel()
                await asyncio.gather(prompt, return_exceptions=True)
        finally:
            self._redirected.close()

    def redraw(self) -> None:
        self._session.app.invalidate()

    async def read(self) -> Typed:
        """The next message or key; None when the user leaves (or the terminal went away)."""
        assert self._prompt is not None, "read inside `async with reader`"
        typed = asyncio.ensure_future(self._typed.get())
        try:
            await asyncio.wait({typed, self._prompt}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not typed.done():  # the prompt ended, or this read was given up on
                typed.cancel()
        if typed.done():
            return typed.result()
        with contextlib.suppress(EOFError):
            self._prompt.result()  # the prompt ended by itself: why (EOFError: no terminal)
        return None

    def _message(self) -> AnyFormattedText:
        size = self._session.app.output.get_size()
        above = self._above(size.columns, max(3, size.rows // 2))  # the rest: for typing
        return merge_formatted_text([ANSI(above), YOU]) if above else YOU


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
