"""The ``switchboard`` command: the parser, settings and logging; each command lives in its
own module of :mod:`gateway.cli` and registers itself here.

Every command takes the global options (``--home``, ``-v``) before or after its name, has a
description on its ``--help`` page, and those that report something take ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

from gateway import __version__
from gateway.cli import exit_codes
from gateway.core.errors import (
    AnotherInstanceRunning,
    ConfigError,
    PortInUse,
    SchemaRefused,
    StoreDamagedError,
    SwitchboardError,
)

# The commands' modules (and the packages they import) load in build_parser(), inside
# main(): a package missing from an environment not reinstalled after an update is said in
# one line, not a traceback (gateway/core/system/install.py). One imported up here is said
# so by the entry point (gateway/cli/entry.py), which imports this module.

if TYPE_CHECKING:
    from gateway.config.settings import Settings

# How a command needs the configuration: "valid" (refuse to start on an error), "partial"
# (report the error and go on with what is valid: doctor, config), "running" (an error is a
# one-line warning: status, logs, web, trace need only the home and the running gateway's
# own files), "attach" (chat: "running" while a gateway runs to attach to, else "valid"),
# "none" (completion). Every command moves renamed keys in config.toml as it reads it, but
# those that set changes_nothing (doctor, upgrade: they report them).
NEEDS_SETTINGS = "needs_settings"


class Parser(argparse.ArgumentParser):
    """A command or action left out shows the help page that lists them (argparse would say
    only "the following arguments are required: COMMAND")."""

    def error(self, message: str) -> NoReturn:
        missing = message.removeprefix("the following arguments are required: ")
        if missing != message and missing.split(",", maxsplit=1)[0] in (
            "COMMAND",
            "ACTION",
            "THING",
        ):
            self.print_help(sys.stderr)
            self.exit(2, f"\n{self.prog}: error: {message}\n")
        super().error(message)


def chosen_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the command (and action) ``args`` chose: ``switchboard run --bogus``
    is told with ``run``'s usage, not the top-level one."""
    while True:
        commands = next(
            (a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        name = None if commands is None else getattr(args, commands.dest, None)
        if commands is None or name not in commands.choices:
            return parser
        parser = commands.choices[name]


def _description() -> str:
    """What Switchboard is, naming every registered channel."""
    from gateway.config.plugins import channel_plugins  # noqa: PLC0415

    titles = ", ".join(plugin.title for plugin in channel_plugins().values())
    return (
        f"A self-hosted AI assistant gateway: one assistant on {titles}, a web chat and the "
        "terminal; other programs reach it through signed webhooks and an OpenAI-compatible API."
    )


def build_parser() -> argparse.ArgumentParser:
    from gateway.cli import (  # noqa: PLC0415 - see above
        admin,
        api_tokens,
        backup,
        browser,
        completion,
        config,
        logs,
        run,
        skills,
        status,
        upgrade,
        web,
    )
    from gateway.cli.doctor import command as doctor  # noqa: PLC0415
    from gateway.cli.onboard import command as onboard  # noqa: PLC0415
    from gateway.cli.service import command as service  # noqa: PLC0415

    parser = Parser(
        prog="switchboard",
        description=_description(),
        epilog="`switchboard COMMAND --help` describes a command. Docs: README.md, docs/.",
    )
    parser.add_argument("--version", action="version", version=f"switchboard {__version__}")
    _global_options(parser, default=True)
    parser.set_defaults(**{NEEDS_SETTINGS: "valid"})
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, default=False)
    commands = cast(  # of Parser, as every subcommand's own subcommands are
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", required=True, metavar="COMMAND"),
    )
    onboard.register(commands, common)
    run.register(commands, common)
    _register_chat(commands, common)
    doctor.register(commands, common)
    status.register(commands, common)
    web.register(commands, common)
    config.register(commands, common)
    logs.register(commands, common)
    service.register(commands, common)
    admin.register(commands, common)
    backup.register(commands, common)
    api_tokens.register(commands, common)
    browser.register(commands, common)
    upgrade.register(commands, common)
    _register_mcp(commands, common)
    skills.register(commands, common)
    completion.register(commands, common)
    return parser


def _global_options(parser: argparse.ArgumentParser, *, default: bool) -> None:
    """``--home`` and ``-v``, on the top-level parser (with defaults) and on every command
    (without, so a value given before the command is not reset after it)."""
    parser.add_argument(
        "--home",
        type=Path,
        default=None if default else argparse.SUPPRESS,
        help="Switchboard's home directory (overrides SWITCHBOARD_HOME; default ~/.switchboard)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if default else argparse.SUPPRESS,
        help="log to the console at debug level",
    )


def _register_chat(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    text = "Talk to the agent in this terminal (same journal, loop and guards as the channels)."
    chat = commands.add_parser(
        "chat", parents=[common], help="talk to the agent in this terminal", description=text
    )
    chat.add_argument("-m", "--message", help="send one message, print the answer, exit")
    chat.set_defaults(handler=_chat, **{NEEDS_SETTINGS: "attach"})


def _register_mcp(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    from gateway.cli import mcp as mcp_cli  # noqa: PLC0415

    mcp_cli.add_parser(commands, common)
    commands.choices["mcp"].set_defaults(
        handler=lambda args, settings: asyncio.run(mcp_cli.run(settings, args))
    )


def _chat(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.cli.chat.command import chat  # noqa: PLC0415 - the terminal chat (gateway/cli/chat/command.py)
    from gateway.runtime.home import onboard as create_home  # noqa: PLC0415

    problem: ConfigError | None = getattr(args, "config_problem", None)
    if problem is not None:  # a running gateway to attach to (main checked), never one here
        try:
            return asyncio.run(chat(settings, args.message, attach_only=problem))
        except ConfigError as exc:  # it went away meanwhile
            print(f"switchboard: {exc}", file=sys.stderr)
            return exit_codes.CONFIG
    # First run: create what is missing, but not config.toml: `onboard` writes that once the
    # model is chosen. At a terminal with no model configured, onboarding comes first (every
    # message would fail "no AI model is configured" otherwise).
    create_home(settings.home, settings.workspace_dir, config=False)
    if args.message is None and sys.stdin.isatty() and sys.stdout.isatty():
        from agent.llm.factory import configuration_problem  # noqa: PLC0415

        if configuration_problem(settings.llm) is not None:
            from gateway.cli.onboard.command import onboard_command  # noqa: PLC0415

            print("No model is configured yet: choose one first (`switchboard onboard`).")
            asked = argparse.Namespace(
                channel=None, provider=None, base_url=None, model=None, api_key=None,
                context_window=None, non_interactive=False, no_check=False, set=None,
                test_to=None,
            )  # fmt: skip
            if (code := onboard_command(asked, settings)) != 0:
                return code
            from gateway.config.settings import load_settings  # noqa: PLC0415

            settings = load_settings()  # with the model just saved
    return asyncio.run(chat(settings, args.message))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. A reader that goes away early (``switchboard status --json | head``)
    ends it quietly, as it ends any Unix tool: exit 141 (128 + SIGPIPE), no traceback. A
    package the code imports and the environment lacks is said in one line, with the command
    that installs it."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here for output still in the buffer
    except ImportError as exc:
        from gateway.core.system.install import missing_package  # noqa: PLC0415

        said = missing_package(exc)
        if said is None:
            raise
        print(f"switchboard: {said}", file=sys.stderr)
        _into_the_log_file(said)
        return exit_codes.NOT_INSTALLED
    except BrokenPipeError:
        # Whatever is still buffered can never be written: point stdout at /dev/null so the
        # interpreter's flush at exit does not report the broken pipe again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exit_codes.BROKEN_PIPE
    return code


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (`switchboard completion`)
        from gateway.cli import completion  # noqa: PLC0415

        completion.complete(parser)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        chosen_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.home is not None:
        os.environ["SWITCHBOARD_HOME"] = str(args.home)
        from gateway.cli.onboard.shell_command import given_home  # noqa: PLC0415

        given_home(args.home)
    needs = getattr(args, NEEDS_SETTINGS)
    if needs == "none":
        return int(args.handler(args, None))
    held = _Held()
    try:
        settings = held.while_reading(args, needs)
    except ConfigError as exc:
        held.say(console=False)
        print(f"switchboard: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    from gateway.cli.home import READS_HOME, missing_home  # noqa: PLC0415

    if getattr(args, READS_HOME, False) and (missing := missing_home(settings)) is not None:
        print(f"switchboard: {missing}", file=sys.stderr)  # and nothing made there
        return 1
    problem = getattr(args, "config_problem", None) if needs in ("running", "attach") else None
    if problem is not None and (code := _despite(args, settings, problem)) is not None:
        return code
    from gateway.config.plugins import channel_plugins, token_patterns  # noqa: PLC0415
    from gateway.core.system.logs import Redactor, configure_logging, secret_values  # noqa: PLC0415

    quiet_console = args.command != "run" and not args.verbose
    configure_logging(
        level="debug" if args.verbose else settings.log_level,
        redactor=Redactor(secret_values(settings), patterns=token_patterns()),
        log_file=settings.data_dir / "logs" / "switchboard.log"
        if args.command in ("run", "chat")
        else None,
        console=not quiet_console,
        fmt=settings.logging.format,
        # chat -v: debug lines on this console, not in the log it shares with `run`
        file_level=settings.log_level if args.command == "chat" else None,
        quiet=[logger for plugin in channel_plugins().values() for logger in plugin.loggers],
    )
    held.say(console=not quiet_console)
    try:
        return int(args.handler(args, settings))
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    except AnotherInstanceRunning as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        _into_the_log_file(f"{args.command} refused: {exc}")
        return exit_codes.ANOTHER_INSTANCE
    except SwitchboardError as exc:
        said = "\n".join([str(exc), *getattr(exc, "__notes__", ())])  # notes: what else to know
        print(f"switchboard: {said}", file=sys.stderr)
        _into_the_log_file(f"{args.command} failed: {said}")
        return _exit_status(exc)


def _exit_status(exc: SwitchboardError) -> int:
    """The status of a command that failed with ``exc``: its own for what no restart
    changes (gateway/cli/exit_codes.py), also when it shows only after the settings loaded
    (a channel's settings, a token the platform refuses, a port taken), else 1."""
    if isinstance(exc, PortInUse):
        return exit_codes.PORT_IN_USE
    if isinstance(exc, ConfigError):
        return exit_codes.CONFIG
    if isinstance(exc, SchemaRefused | StoreDamagedError):
        return exit_codes.STORE_REFUSED
    return exit_codes.FAILED


class _Held(logging.Handler):
    """What reading the settings logged (a renamed key moved in config.toml, a
    ``SWITCHBOARD_*`` variable that names no setting), held until the command's logging is
    set up: then it goes where the command's lines go (the console and, for ``run`` and
    ``chat``, the log file that ``switchboard logs`` shows), not only to the standard error."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def while_reading(self, args: argparse.Namespace, needs: str) -> Settings:
        root = logging.getLogger()
        root.addHandler(self)
        try:
            return _settings(args, needs)
        finally:
            root.removeHandler(self)

    def say(self, *, console: bool) -> None:
        """Each line held, through the logging set up since (``console``: it has a console
        handler), else on the standard error and into the log file, if the command has one."""
        for record in self.records:
            if console:
                logging.getLogger(record.name).handle(record)
            else:
                print(f"switchboard: {record.getMessage()}", file=sys.stderr)
                _into_the_log_file(record)


def _into_the_log_file(said: str | logging.LogRecord) -> None:
    """A failure the console was told goes into the log file too (what a service's owner
    reads afterwards), without printing it twice."""
    record = (
        said
        if isinstance(said, logging.LogRecord)
        else logging.LogRecord(__name__, logging.ERROR, __file__, 0, "%s", (said,), None)
    )
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def _despite(args: argparse.Namespace, settings: Settings, problem: ConfigError) -> int | None:
    """A command that reads the running gateway goes on despite an invalid configuration,
    saying so in one line; ``chat`` only to attach to a running gateway (one in its own
    process would run on what is valid of it): the exit status when it stops here."""
    from gateway.cli.gateway_api import find_running  # noqa: PLC0415
    from gateway.cli.home import config_warning  # noqa: PLC0415

    running = find_running(settings) is not None
    if getattr(args, NEEDS_SETTINGS) == "attach" and not running:
        print(f"switchboard: {problem}", file=sys.stderr)
        return exit_codes.CONFIG
    print(config_warning(problem, running=running), file=sys.stderr)
    return None


def _settings(args: argparse.Namespace, needs: str) -> Settings:
    from gateway.config.settings import load_settings  # noqa: PLC0415 - not for completion

    if needs not in ("partial", "running", "attach"):
        return load_settings()
    if needs != "partial":  # as a valid start reads it (a renamed key is moved), when it is
        try:
            settings = load_settings()
        except ConfigError:
            pass
        else:
            args.config_problem = None
            return settings
    from gateway.config.partial import load_what_is_valid  # noqa: PLC0415

    settings, problem = load_what_is_valid(move=not getattr(args, "changes_nothing", False))
    args.config_problem = problem  # the command reports it (doctor: a [FAIL] line)
    return settings
