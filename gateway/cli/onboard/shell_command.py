"""How to run ``switchboard`` again, for the "Next:" lines a command prints.

``switchboard`` is a command the shell finds only when its folder is on the PATH; a checkout
installs it in ``.venv/bin``, which is not, until ``make link``. So a "Next:" line names it
plainly when the shell finds this very install under that name, else by its full path, and
:func:`path_note` says how to put it on the PATH.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]  # the source checkout, when run from one

_given_home: list[Path] = []  # the --home of this command line, which the next one needs too


def given_home(home: Path) -> None:
    """This command was given ``--home``: the commands it suggests are given it too."""
    _given_home[:] = [home]


def home_given() -> Path | None:
    """The ``--home`` this command was given, if any."""
    return _given_home[0] if _given_home else None


def switchboard(arguments: str) -> str:
    """``switchboard <arguments>`` as this person can type it (with this command's
    ``--home``, when it was given one)."""
    home = f" --home {shlex.quote(str(_given_home[0]))}" if _given_home else ""
    return f"{_program()}{home} {arguments}"


def path_note() -> str:
    """How to reach ``switchboard`` by name; empty when the shell finds it already."""
    if _program() == "switchboard":
        return ""
    if (CHECKOUT / "Makefile").is_file():
        # make reads the home from the environment: the --home given goes there
        env = f"SWITCHBOARD_HOME={shlex.quote(str(_given_home[0]))} " if _given_home else ""
        return (
            f"(`switchboard` is not on your PATH: in {CHECKOUT}, `{env}make chat` and "
            f"`{env}make run` do the same, and `make link` puts it on your PATH)"
        )
    return f"(`switchboard` is not on your PATH: add {_installed().parent} to it)"


def _installed() -> Path:
    """The ``switchboard`` script installed beside this Python (``.venv/bin``)."""
    return Path(sys.executable).parent / "switchboard"


def _program() -> str:
    installed = _installed()
    if not installed.exists():  # run as `python -m gateway` from an uninstalled checkout
        return f"{sys.executable} -m gateway"
    found = shutil.which("switchboard")
    if found is not None and Path(found).resolve() == installed.resolve():
        return "switchboard"
    return str(installed)
