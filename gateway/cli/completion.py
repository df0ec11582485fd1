"""``switchboard completion bash|zsh|fish``: a script that makes the shell complete commands,
options and arguments of ``switchboard``.

The scripts come from argcomplete: the shell calls ``switchboard`` itself with the
command line in ``_ARGCOMPLETE`` variables, and :func:`complete` answers from the real
parser, so completions never go stale. Install, for example::

    switchboard completion bash > ~/.local/share/bash-completion/completions/switchboard
    switchboard completion zsh > "${fpath[1]}/_switchboard"
    switchboard completion fish > ~/.config/fish/completions/switchboard.fish
"""

from __future__ import annotations

import argparse
from typing import Any

SHELLS = ("bash", "zsh", "fish")


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    text = (
        "Print the shell completion script for bash, zsh or fish. Load it now with "
        "`source <(switchboard completion bash)` or install it as the shell's docs say."
    )
    command = commands.add_parser(
        "completion", parents=[common], help="shell completion script", description=text
    )
    command.add_argument("shell", choices=SHELLS, help="the shell: bash, zsh or fish")
    command.set_defaults(handler=completion_command, needs_settings="none")


def completion_command(args: argparse.Namespace, settings: Any) -> int:
    from argcomplete.shell_integration import shellcode  # noqa: PLC0415 - only when asked

    print(shellcode(["switchboard"], shell=args.shell), end="")
    return 0


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit (argcomplete's protocol)."""
    import argcomplete  # noqa: PLC0415 - only when the shell asks

    argcomplete.autocomplete(parser)
