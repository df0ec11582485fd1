"""How ``switchboard chat`` shows the conversation: the windows of the terminal channel.

:class:`RichView` is for a person at a terminal: answers stream in as the model writes them
under a "thinking…" line that names the running tool, then the final answer (from the
durable outbox) replaces them, rendered as markdown by rich. The streamed text and the
thinking line are the live region: drawn by the prompt above its input line in the
interactive chat (:mod:`gateway.cli.chat.prompt`), by rich's ``Live`` for ``-m``. A turn that
ends in a notice (stopped, failed) keeps what it had streamed, dimmed, above the notice.
:class:`PlainView` is for pipes and scripts (``switchboard chat -m TEXT | ...``): each
message's text as it is, no escape codes, and notes (resuming, stopping) on stderr.

With ``earlier`` set (``-m`` before its message is sent), messages answer questions asked
before: they are marked "(earlier, undelivered)", go to stderr from :class:`PlainView`, and
a failure notice among them does not count as this run's failure.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
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
EARLIER = "(earlier, undelivered)"
YOU = "you› "  # the prompt, and what the chat prints before each message sent
CONTINUATION = "   … "  # before the further lines of a message
TICK = 1 / 8  # seconds between two redraws of the prompt's live region (the spinner turns)
# Control characters other than newline and tab: model output must not drive the terminal
# (escape sequences can retitle it, rewrite the screen or set the clipboard).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A hyperlink (OSC 8) around a link's text: the prompt's ANSI reader knows colours and styles
# only, and would show these as text.
_HYPERLINK = re.compile(r"\x1b\]8;[^\x1b]*\x1b\\")


def printable(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class Answer(Markdown):
    """Markdown as chat apps show it: a single newline is a line break (like the web chat)."""

    def __init__(self, text: str, style: str = "none") -> None:
        text = printable(text)
        super().__init__(text, style=style)
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
        self.earlier = False

    def show(self, frame: LiveFrame) -> None:
        if isinstance(frame, Started) and (note := self.mine.resumed_note(frame)):
            self.say(note)

    async def deliver(self, message: Message) -> bool:
        out = self._notes if self.earlier else self._out
        text = (
            _with_files(message)
            if out.isatty()
            else message.text + "".join(f"\n[file: {path}]" for path in message.files)
        )
        if self.earlier:
            out.write(f"{EARLIER} {text}\n")
        else:
            if message.kind == "notice":
                self.notices += 1
            out.write(f"{self._prefix}{text}\n")
        out.flush()
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
        self.text = ""  # only ever grows
        self.spinner = Spinner("dots", text=Text(THINKING, style="dim"))
        self.height: int | None = None  # lines it may take; None: the screen's height
        # The text's lines as last rendered, and for what (length, width): the spinner turns
        # 8 times a second, and a long answer takes long to render as markdown.
        self._lines: list[list[Segment]] = []
        self._rendered: tuple[int, int] = (0, 0)

    def status(self, text: str) -> None:
        self.spinner.update(text=Text(text, style="dim"))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.text:
            if self._rendered != (len(self.text), options.max_width):
                self._lines = console.render_lines(Answer(self.text), options, pad=False)
                self._rendered = (len(self.text), options.max_width)
            room = max(1, (self.height or options.size.height) - 2)  # never taller than that
            for line in self._lines[-room:]:
                yield from line
                yield Segment.line()
        yield self.spinner


class RichView:
    """A terminal window: streaming, a thinking line with the running tool, markdown."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.mine = _Mine()
        self.notices = 0
        self.earlier = False
        # Set while a prompt is open for the whole chat: the prompt draws the live region
        # above its input line (:meth:`region`), and this asks it to draw again. Unset:
        # rich's Live draws it.
        self.redraw: Callable[[], None] | None = None
        self._progress: _Progress | None = None  # the live region, while a turn runs
        self._live: Live | None = None
        self._ticking: asyncio.TimerHandle | None = None
        self._turn: str | None = None

    def show(self, frame: LiveFrame) -> None:
        if isinstance(frame, Started):
            if note := self.mine.resumed_note(frame):
                self.say(note)
            self._turn = frame.turn
            self.busy()
        elif isinstance(frame, Tool) and frame.turn == self._turn and self._progress is not None:
            self._progress.status(f"{THINKING} running {frame.name}")
            self._refresh(at_once=True)
        elif isinstance(frame, Delta):
            self._turn = frame.turn
            self.busy()
            assert self._progress is not None
            self._progress.text += frame.text
            self._refresh()
        elif isinstance(frame, Ended) and frame.turn == self._turn and not frame.answered:
            self._stop()  # nothing will replace what was streamed: it goes

    async def deliver(self, message: Message) -> bool:
        final = message.kind in ("reply", "notice")
        running = self._progress is not None
        streamed = (
            self._progress.text if self._progress is not None and message.turn == self._turn else ""
        )
        self._stop()
        if self.earlier:
            self.say(EARLIER)
        if message.kind == "notice":
            if not self.earlier:
                self.notices += 1
            if streamed:  # what the turn wrote before it stopped (or failed) stays, dimmed
                self.console.print(Answer(streamed, style="dim"))
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

    def sent(self, text: str) -> None:
        """What the person sent, as the prompt showed it (the prompt is ready for the next)."""
        lines = printable(text).split("\n")
        self.console.print(Text.assemble((YOU, "bold green"), f"\n{CONTINUATION}".join(lines)))

    def busy(self) -> None:
        """Show the thinking line now (a message was just sent, or a turn started)."""
        if self._progress is not None:
            return
        self._progress = _Progress()
        if self.redraw is not None:
            self._tick()
            return
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

    def region(self, width: int, height: int) -> str:
        """The live region as ANSI text for the prompt to draw above its input line, at
        most ``height`` lines; "" when nothing runs."""
        if self._progress is None:
            return ""
        self._progress.height = height
        with self.console.capture() as captured:
            self.console.print(self._progress, width=width)
        return _HYPERLINK.sub("", captured.get())  # the final answer, printed, keeps its links

    def _tick(self) -> None:
        if self.redraw is None or self._progress is None:
            self._ticking = None
            return
        self.redraw()
        self._ticking = asyncio.get_running_loop().call_later(TICK, self._tick)

    def _refresh(self, *, at_once: bool = False) -> None:
        if self._live is not None:
            self._live.refresh()
        elif at_once and self.redraw is not None:
            self.redraw()  # else the next tick draws it: an answer streams in many pieces

    def _stop(self) -> None:
        self._progress = None
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._ticking is not None:
            self._ticking.cancel()
            self._ticking = None
        if self.redraw is not None:
            self.redraw()
