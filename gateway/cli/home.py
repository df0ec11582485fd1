"""What the commands that read a home rather than run one need of it.

``status``, ``logs``, ``web``, ``trace``, ``pairing``, ``cron`` and ``backup`` look at a home
that exists: one mistyped in ``SWITCHBOARD_HOME`` (or ``--home``) is said to be none, and
nothing is created there (opening the store would make ``data/`` and an empty database,
and every later command would then report "nothing there" instead of "no home"). With
``storage.url`` the store is a cluster's database, which a home of no node of its own
looks at too (docs/scaling.md).

A configuration error is said in one line by the commands that need only the home and the
running gateway's own files (``status``, ``logs``, ``web``, ``trace``, ``chat`` attaching to
a running gateway): the gateway keeps its last valid configuration, and these commands are
how its owner finds out what it does and why (``logs``), or gets to its settings page
(``web``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gateway.cli.onboard.shell_command import home_given, switchboard

if TYPE_CHECKING:
    from pathlib import Path

    from gateway.config.settings import Settings
    from gateway.core.errors import ConfigError

READS_HOME = "reads_home"  # set_defaults(reads_home=True): the command needs an existing home


def missing_home(settings: Settings) -> str | None:
    """Why the command cannot read ``settings.home`` (it is not there), with where the path
    came from and how to make a home there; None when it exists."""
    home = settings.home
    if home.is_dir() or settings.storage.url is not None:  # a cluster's store is elsewhere
        return None
    if home_given() is not None:
        source = " (--home)"
    elif os.environ.get("SWITCHBOARD_HOME"):
        source = " (SWITCHBOARD_HOME)"
    else:
        source = " (the default: SWITCHBOARD_HOME is not set)"
    return (
        f"there is no Switchboard home at {home}{source}: check the path, or make one there "
        f"with `{switchboard('onboard')}`"
    )


def one_line(problem: ConfigError) -> str:
    """A configuration error in one line: its problems joined (the message lists one a
    line under "Invalid configuration:")."""
    lines = [line.strip() for line in str(problem).splitlines() if line.strip()]
    if lines and lines[0].rstrip(":") == "Invalid configuration":
        lines = lines[1:]
    return "; ".join(lines) or "Invalid configuration"


def config_warning(problem: ConfigError, *, running: bool) -> str:
    """The one line a command that goes on despite ``problem`` prints first."""
    then = (
        "the running gateway keeps its last valid configuration"
        if running
        else "a gateway would not start with it"
    )
    return (
        f"switchboard: warning: the configuration is invalid ({one_line(problem)}); {then}; "
        f"`{switchboard('doctor')}` checks it"
    )


def problem_keys(problem: ConfigError, home: Path) -> list[tuple[str, str]] | None:
    """Each setting ``problem`` finds invalid, with what is wrong with it and who set it
    ((dotted key, why) each; the key is "" for a check across sections); None when the
    file cannot be read at all, so no value of it is known."""
    from pydantic import ValidationError  # noqa: PLC0415

    from gateway.config.explain import problems  # noqa: PLC0415
    from gateway.config.settings import Settings  # noqa: PLC0415
    from gateway.config.sources import describe  # noqa: PLC0415
    from gateway.core.errors import ConfigFileUnreadable  # noqa: PLC0415

    if isinstance(problem, ConfigFileUnreadable):
        return None
    cause = problem.__cause__
    if isinstance(cause, ValidationError):
        return problems(cause, Settings, describe(home))
    return [(problem.field or "", str(problem))]
