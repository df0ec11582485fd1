"""``switchboard logs [-f]``: the gateway's log file (``data/logs/switchboard.log``), the last
lines, and with ``-f`` every new line as it is written (across log rotation) until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections import deque
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from gateway.config.settings import Settings


POLL_SECONDS = 0.25
DESCRIPTION = (
    "Print the last lines of the gateway's log (data/logs/switchboard.log, secrets already "
    "redacted); -f keeps printing new lines until Ctrl-C."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "logs", parents=[common], help="show (and follow) the log", description=DESCRIPTION
    )
    command.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    command.add_argument(
        "-n", "--lines", type=_count, default=50, metavar="N", help="lines to show first (50)"
    )
    command.set_defaults(handler=logs_command, needs_settings="running", reads_home=True)


def _count(text: str) -> int:
    """A number of lines: 0 or more (a negative count would quietly print nothing)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of lines: {text!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{count}: a number of lines is 0 or more")
    return count


def log_path(settings: Settings) -> Path:
    return settings.data_dir / "logs" / "switchboard.log"


def logs_command(args: argparse.Namespace, settings: Settings) -> int:
    path = log_path(settings)
    if not path.exists() and not args.follow:
        print(
            f"switchboard: no log yet at {path}: the gateway writes it while `switchboard "
            "run` or `switchboard chat` runs.",
            file=sys.stderr,
        )
        return 1
    if not args.follow:
        with path.open(encoding="utf-8", errors="replace") as handle:
            sys.stdout.writelines(deque(handle, maxlen=args.lines))
        return 0
    # Ctrl-C or SIGTERM ends it. SIGTERM too: a shell without job control starts background
    # jobs with SIGINT ignored, and then only SIGTERM can ask it to stop cleanly.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        follow(path, sys.stdout, last=args.lines)
    except KeyboardInterrupt:
        return 0
    return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def follow(path: Path, out: TextIO, *, last: int) -> None:
    """Print the ``last`` lines of ``path``, then every line appended, forever; reopen it
    when it is rotated or replaced (a new file is printed from its start)."""
    handle: TextIO | None = None
    inode: int | None = None
    while True:
        if handle is None and path.exists():
            handle = path.open(encoding="utf-8", errors="replace")
            inode = os.fstat(handle.fileno()).st_ino
            if last:
                out.writelines(deque(handle, maxlen=last))  # the tail, read to the end
                out.flush()
                last = 0
        if handle is not None:
            line = handle.readline()
            if line:
                out.write(line)
                out.flush()
                continue
            if _replaced(path, inode, handle):
                handle.close()
                handle = None
                continue
        time.sleep(POLL_SECONDS)  # a CLI loop waiting for a file, not a test


def _replaced(path: Path, inode: int | None, handle: TextIO) -> bool:
    try:
        info = path.stat()
    except OSError:
        return True
    return info.st_ino != inode or info.st_size < handle.tell()
