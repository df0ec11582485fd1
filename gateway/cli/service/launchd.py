"""The launchd agent's stopped file: what lets launchd restart the gateway on a crash only.

launchd's ``KeepAlive`` tells exit statuses apart only as zero or not (``SuccessfulExit``)
and has no list of statuses not to restart on, as systemd's ``RestartPreventExitStatus``
is; its ``Crashed`` counts only a few signals, not an exception's exit 1. So the agent
(gateway/cli/service/command.py) keeps the gateway running while the file named by
``SWITCHBOARD_STOPPED_FILE`` is absent (``PathState``): ``switchboard run`` removes it when
it starts and writes it when it ends in a way no restart changes, stopped (0) or one of
:data:`~gateway.cli.exit_codes.A_PERSON_MUST_ACT`. A crash (an exception, a signal, any
other status) leaves it absent, and launchd starts the gateway again.

Only the standard library: the entry point (gateway/cli/entry.py) uses it before anything
that may be missing is imported.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gateway.cli.exit_codes import A_PERSON_MUST_ACT, FAILED, OK

STOPPED_FILE = "SWITCHBOARD_STOPPED_FILE"  # set by the agent only
LABEL = "dev.switchboard.gateway"


def supervised(args: Sequence[str], command: Callable[[], int]) -> int:
    """Run ``command`` (the arguments ``args``), keeping the stopped file when launchd runs
    ``switchboard run`` (its agent's command); else just run it."""
    path = os.environ.get(STOPPED_FILE)
    if not path or "run" not in args:
        return command()
    stopped = Path(path)
    try:
        stopped.unlink(missing_ok=True)  # running: a crash from now on is restarted
    except OSError as exc:
        print(
            f"switchboard: cannot remove {stopped} ({exc.strerror or exc}): launchd will not "
            "start the gateway again after a crash",
            file=sys.stderr,
        )
    ended: int | str | None = FAILED  # what an exception leaves: a crash
    try:
        code = ended = command()
    except SystemExit as exc:  # argparse's own exits
        ended = exc.code
        raise
    finally:
        if ended == OK or ended in A_PERSON_MUST_ACT:
            _hold(stopped, ended)
    return code


def _hold(stopped: Path, code: int | str | None) -> None:
    """Write the stopped file, saying why and how to start the gateway again."""
    when = time.strftime("%Y-%m-%d %H:%M:%S %z")
    why = "it was stopped" if code == OK else "a restart would fail the same way"
    text = (
        f"switchboard run exited with status {code} at {when}, and {why}: launchd does not "
        "start it again while this file exists. What it said is at the end of the agent's "
        "error log (data/logs/service.err.log). Start it again by deleting this file, or "
        f"with `launchctl kickstart gui/{os.getuid()}/{LABEL}`.\n"
    )
    try:
        stopped.parent.mkdir(parents=True, exist_ok=True)
        stopped.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(
            f"switchboard: cannot write {stopped} ({exc.strerror or exc}): launchd will "
            "start the gateway again",
            file=sys.stderr,
        )
