"""The terminal chat's live region, as the prompt draws it: what rich renders must read back
through prompt_toolkit's ANSI reader as the text a person should see."""

from __future__ import annotations

from prompt_toolkit.formatted_text import ANSI, fragment_list_to_text, to_formatted_text
from rich.console import Console

from channels.terminal.frames import Delta, Message
from gateway.cli.chat.view import RichView


def drawn(view: RichView, width: int = 60, height: int = 10) -> str:
    """The live region's text as the prompt shows it."""
    return fragment_list_to_text(to_formatted_text(ANSI(view.region(width, height))))


def prompt_view() -> tuple[RichView, list[None]]:
    """A view whose live region a prompt draws; the list counts the redraws it asked for."""
    view = RichView(Console(force_terminal=True, width=60, highlight=False))
    redraws: list[None] = []
    view.redraw = lambda: redraws.append(None)
    return view, redraws


async def test_the_live_region_shows_a_links_text_without_its_escape_codes() -> None:
    view, redraws = prompt_view()
    assert drawn(view) == ""  # nothing runs: nothing above the prompt
    view.show(Delta(turn="t1", text="See [the docs](https://example.com/x) and `code`"))
    lines = drawn(view).splitlines()
    assert [line.rstrip() for line in lines[:-1]] == ["See the docs and code"]
    assert lines[-1].endswith("thinking…")
    assert redraws  # the prompt was asked to draw it


async def test_the_live_region_keeps_to_its_height_and_shows_the_latest_lines() -> None:
    view, _ = prompt_view()
    view.show(Delta(turn="t1", text="\n".join(f"line {i}" for i in range(50))))
    lines = drawn(view, height=6).splitlines()
    assert len(lines) <= 6
    assert lines[-2].rstrip() == "line 49"  # the tail, above the thinking line


async def test_a_stopped_turn_keeps_what_it_had_written_above_its_notice() -> None:
    view, _ = prompt_view()
    view.show(Delta(turn="t1", text="Half an answ"))
    with view.console.capture() as printed:
        await view.deliver(Message(id="t1:notice", kind="notice", text="Stopped.", turn="t1"))
    shown = printed.get()
    assert shown.index("Half an answ") < shown.index("Stopped.")
    assert "\x1b[2mHalf an answ" in shown  # dimmed: not an answer
    assert drawn(view) == ""  # the live region went
