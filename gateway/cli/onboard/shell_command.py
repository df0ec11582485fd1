"""How to run ``switchboard`` again, for the "Next:" lines a command prints.

``switchboard`` is a command the shell finds only when its folder is on the PATH; a checkout
installs it in ``.venv/bin``, which is not, until ``make link``. So a "Next:" line names it
plainly when the shell finds this very install under that name, else by its full path, and
:func:`path_note` says how to put it on the PATH.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]  # the source checkout, when run from one


def switchboard(arguments: str) -> str:
    """``switchboard <arguments>`` as this person can type it."""
    return f"{_program()} {arguments}"


def path_note() -> str:
    """How to reach ``switchboard`` by name; empty when the shell finds it already."""
    if _program() == "switchboard":
        return ""
    if (CHECKOUT / "Makefile").is_file():
        return (
            f"(`switchboard` is not on your PATH: in {CHECKOUT}, `make chat` and `make run` "
            "do the same, and `make link` puts it on your PATH)"
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
