"""Where the ``switchboard`` command starts: the console script and ``python -m gateway``.

It imports only the standard library and modules of this project that import nothing else,
and the command itself (gateway/cli/main.py) inside a ``try``: code updated without
reinstalling may import a package the environment lacks (or has too old) anywhere, at the
top of the command's own module too, and that is said in one line naming the package and
the command that installs it, with exit status 6, never as a traceback. Under launchd it
also keeps the agent's stopped file (gateway/cli/service/launchd.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gateway.cli.exit_codes import NOT_INSTALLED
from gateway.cli.service.launchd import supervised


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``argv``: its arguments, default the process's)."""
    args = sys.argv[1:] if argv is None else list(argv)
    return supervised(args, lambda: _command(args))


def _command(args: list[str]) -> int:
    try:
        from gateway.cli.main import main as command  # noqa: PLC0415 - see the docstring
    except ImportError as exc:
        from gateway.core.system.install import missing_package  # noqa: PLC0415 - stdlib only

        said = missing_package(exc)
        if said is None:  # a module of ours: a bug, or a damaged checkout
            raise
        print(f"switchboard: {said}", file=sys.stderr)
        return NOT_INSTALLED
    return command(args)
