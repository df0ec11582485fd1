"""The gateway's log and trace files: readable by its user only however they come to be
(rotated, made anew, left by an older version), and a flood of one message does not wipe
the history away (the log keeps 3 x 5 MB: 8,000 identical tracebacks rotated out the
record of a prompt injection a few minutes earlier)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.guards.trace import TurnTrace
from gateway.core.system.logs import REPEATS_KEPT, LogFile, Redactor, configure_logging
from gateway.core.turns import TurnKind


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most systems give (022: new files 0644, folders 0755)."""
    before = os.umask(0o022)
    yield
    os.umask(before)


@pytest.fixture
def logging_to(tmp_path: Path) -> Iterator[Path]:
    """The process's logging set up as ``switchboard run`` sets it up, into a log file of
    its own (the test's logging put back after)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    path = tmp_path / "data" / "logs" / "switchboard.log"
    try:
        yield path
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


def the_log_file() -> LogFile:
    [handler] = [h for h in logging.getLogger().handlers if isinstance(h, LogFile)]
    return handler


def start_logging(path: Path) -> None:
    configure_logging(level="info", redactor=Redactor(), log_file=path, console=False)


def test_log_files_and_their_folder_are_the_gateway_users_only_after_rotations(
    usual_umask: None, logging_to: Path
) -> None:
    logging_to.parent.mkdir(parents=True)
    logging_to.parent.chmod(0o755)  # as an older version made it
    older = logging_to.with_name("switchboard.log.2")
    older.write_text("rotated by an older version\n")
    older.chmod(0o644)
    start_logging(logging_to)
    log = logging.getLogger("gateway.test")
    log.info("before the rotation")
    the_log_file().doRollover()
    log.info("after the rotation")
    the_log_file().doRollover()
    log.info("after the second")
    files = sorted(logging_to.parent.iterdir())
    assert [f.name for f in files] == [
        "switchboard.log",
        "switchboard.log.1",
        "switchboard.log.2",
        "switchboard.log.3",
    ]
    assert {f.name: oct(mode(f)) for f in files} == {f.name: "0o600" for f in files}
    assert oct(mode(logging_to.parent)) == "0o700"
    assert "after the second" in logging_to.read_text()


def test_a_days_trace_folder_is_the_gateway_users_only(usual_umask: None, tmp_path: Path) -> None:
    traces = tmp_path / "data" / "traces"
    written = TurnTrace("turn-1", session_key="memory:1", kind=TurnKind.CHAT).write(traces)
    assert oct(mode(written)) == "0o600"
    assert oct(mode(written.parent)) == "0o700"  # the day's
    assert oct(mode(traces)) == "0o700"


def test_a_flood_of_one_error_keeps_the_history_and_says_how_many_were_left_out(
    logging_to: Path,
) -> None:
    start_logging(logging_to)
    log = logging.getLogger("gateway.test")
    log.warning("the injected page asked for MEMORY.md")  # what the flood would have hidden
    for _ in range(10_000):
        try:
            raise TypeError("comparing strings with non-ASCII characters is not supported")
        except TypeError:
            log.exception("Error handling request from 127.0.0.1")
    log.info("the flood is over")
    the_log_file().close()  # what the window left out is said when the file closes
    text = logging_to.read_text()
    assert "the injected page asked for MEMORY.md" in text
    assert text.count("Error handling request from 127.0.0.1") == REPEATS_KEPT + 1
    assert text.count("Traceback") == REPEATS_KEPT
    assert (
        f"the same message {10_000 - REPEATS_KEPT} more times within 60 s, not logged: "
        "Error handling request from 127.0.0.1"
    ) in text
    assert "the flood is over" in text
    assert not logging_to.with_name("switchboard.log.1").exists()


def test_a_message_repeated_after_its_minute_is_logged_again_with_the_count(
    logging_to: Path,
) -> None:
    start_logging(logging_to)
    log = logging.getLogger("gateway.test")
    for _ in range(REPEATS_KEPT + 5):
        log.warning("the model server refused the connection")
    later = log.makeRecord(
        "gateway.test",
        logging.WARNING,
        __file__,
        1,
        "the model server refused the connection",
        (),
        None,
    )
    later.created += 61  # a minute on
    log.handle(later)
    lines = [line.split(": ", 1)[1] for line in logging_to.read_text().splitlines()]
    assert lines == [
        *["the model server refused the connection"] * REPEATS_KEPT,
        "the same message 5 more times within 60 s, not logged: "
        "the model server refused the connection",
        "the model server refused the connection",
    ]
