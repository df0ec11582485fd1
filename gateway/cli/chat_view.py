"""How ``switchboard chat`` shows the conversation: the windows of the terminal channel.

:class:`RichView` is for a person at a terminal: answers stream in as the model writes them
under a "thinking…" line that names the running tool, then the final answer (from the
durable outbox) replaces them, rendered as markdown by rich. :class:`PlainView` is for
pipes and scripts (``switchboard chat -m TEXT | ...``): each message's text as it is, no
escape codes, and notes (resuming, stopping) on stderr.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text

from channels.terminal.frames import Delta, Ended, LiveFrame, Message, Started, Tool

QUESTION_CHARS = 200
THINKING = "thinking…"
# Control characters other than newline and tab: model output must not drive the terminal
# (escape sequences can retitle it, rewrite the screen or set the clipboard).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class Answer(Markdown):
    """Markdown as chat apps show it: a single newline is a line break (like the web chat)."""

    def __init__(self, text: str) -> None:
        text = printable(text)
        super().__init__(text)
        for token in self.parsed:
            for child in token.children or ():
                if child.type == "softbreak":
                    child.type = "hardbreak"


def _short(text: str) -> str:
    line = printable(" ".join(text.split()))
    return line if len(line) <= QUESTION_CHARS else line[: QUESTION_CHARS - 1] + "…"


def _with_files(message: Message) -> str:
    return printable(message.text + "".join(f"\n[file: {path}]" for path in message.files))


class _Mine:
    """The ids of messages this window submitted, to tell its own turns from others'."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def resumed_note(self, frame: Started) -> str | None:
        if frame.resumed:
            return f"resuming your last question: {_short(frame.question)}"
        if frame.ids and not self.ids.intersection(frame.ids):
            return f"answering: {_short(frame.question)}"  # asked earlier, or elsewhere
        return None


class PlainView:
    """Messages as plain lines on ``out``; notes on ``notes`` (stderr for one-shots)."""

    def __init__(
        self, *, out: TextIO | None = None, notes: TextIO | None = None, prefix: str = ""
    ) -> None:
        self._out = out or sys.stdout
        self._notes = notes or sys.stderr
        self._prefix = prefix
        self.mine = _Mine()
        self.notices = 0
        self.prompting = False

    def show(self, frame: LiveFrame) -> None:
        if isinstance(frame, Started) and (note := self.mine.resumed_note(frame)):
            self.say(note)

    async def deliver(self, message: Message) -> bool:
        if message.kind == "notice":
            self.notices += 1
        text = (
            _with_files(message)
            if self._out.isatty()
            else message.text + "".join(f"\n[file: {path}]" for path in message.files)
        )
        self._out.write(f"{self._prefix}{text}\n")
        self._out.flush()
        return True

    def say(self, text: str) -> None:
        print(text, file=self._notes, flush=True)

    def busy(self) -> None:
        """A message was sent; the answer is on its way (nothing to show here)."""

    def idle(self) -> None:
        """Nothing waiting, running or unsent."""


class _Progress:
    """The live region: the tail of the answer streamed so far, then the spinner line."""

    def __init__(self) -> None:
        self.text = ""
        self.spinner = Spinner("dots", text=Text(THINKING, style="dim"))

    def status(self, text: str) -> None:
        self.spinner.update(text=Text(text, style="dim"))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.text:
            lines = console.render_lines(Answer(self.text), options, pad=False)
            room = max(1, options.size.height - 2)  # never taller than the screen
            for line in lines[-room:]:
                yield from line
                yield Segment.line()
        yield self.spinner


class RichView:
    """A terminal window: streaming, a thinking line with the running tool, markdown."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.mine = _Mine()
        self.notices = 0
        self.prompting = False  # the prompt owns the screen: no live region meanwhile
        self._live: Live | None = None
        self._progress = _Progress()
        self._turn: str | None = None

    def show(self, frame: LiveFrame) -> None:
        if isinstance(frame, Started):
            if note := self.mine.resumed_note(frame):
                self.say(note)
            self._turn = frame.turn
            self.busy()
        elif isinstance(frame, Tool) and frame.turn == self._turn:
            self._progress.status(f"{THINKING} running {frame.name}")
            self._refresh()
        elif isinstance(frame, Delta):
            self._turn = frame.turn
            self.busy()
            self._progress.text += frame.text
            self._refresh()
        elif isinstance(frame, Ended) and frame.turn == self._turn and not frame.answered:
            self._stop()  # nothing will replace what was streamed: it goes

    async def deliver(self, message: Message) -> bool:
        final = message.kind in ("reply", "notice")
        running = self._live is not None
        self._stop()
        if message.kind == "notice":
            self.notices += 1
            self.console.print(Text(_with_files(message), style="yellow"))
        else:
            body = Answer(message.text)
            files = [Text(printable(f"[file: {path}]"), style="cyan") for path in message.files]
            self.console.print(Group(body, *files) if files else body)
        if running and not final:  # interim text (the `message` tool): the turn goes on
            self.busy()
        elif final and message.turn == self._turn:
            self._turn = None
        return True

    def say(self, text: str) -> None:
        self.console.print(Text(text, style="dim"))

    def busy(self) -> None:
        """Show the thinking line now (a message was just sent, or a turn started)."""
        if self._live is not None or self.prompting:
            return
        self._progress = _Progress()
        self._live = Live(
            self._progress,
            console=self.console,
            transient=True,
            refresh_per_second=8,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def idle(self) -> None:
        """The chat has nothing waiting, running or unsent: drop any live region."""
        self._stop()
        self._turn = None

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def _stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
