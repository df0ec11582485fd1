"""The ``switchboard`` command. Parses arguments and hands over; no logic lives here."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway import __version__
from gateway.cli import mcp as mcp_cli
from gateway.config.settings import Settings, load_settings
from gateway.core.errors import AnotherInstanceRunning, ConfigError, SwitchboardError
from gateway.core.logs import Redactor, configure_logging, secret_values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="switchboard", description="A self-hosted AI assistant gateway."
    )
    parser.add_argument("--version", action="version", version=f"switchboard {__version__}")
    parser.add_argument(
        "--home", type=Path, help="overrides SWITCHBOARD_HOME (default ~/.switchboard)"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log to the console at debug level"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "onboard", help="create $SWITCHBOARD_HOME with config.toml and the workspace"
    )
    commands.add_parser("run", help="run every configured channel and the scheduler")
    chat = commands.add_parser("chat", help="talk to the agent in this terminal")
    chat.add_argument("-m", "--message", help="send one message, print the answer, exit")
    pairing = commands.add_parser("pairing", help="approve who may talk to the bot")
    pairing_actions = pairing.add_subparsers(dest="action", required=True, metavar="ACTION")
    pairing_actions.add_parser("list", help="pending codes and paired users")
    clear = pairing_actions.add_parser("clear", help="deny every open pairing request")
    clear.add_argument("channel", nargs="?", help="only this channel's requests")
    for verb in ("approve", "deny"):
        pairing_actions.add_parser(verb, help=f"{verb} a pairing code").add_argument("code")
    revoke = pairing_actions.add_parser("revoke", help="remove a paired user")
    revoke.add_argument("channel")
    revoke.add_argument("user_id")
    cron = commands.add_parser("cron", help="list or remove scheduled jobs")
    cron_actions = cron.add_subparsers(dest="action", required=True, metavar="ACTION")
    cron_actions.add_parser("list", help="every active job")
    cron_actions.add_parser("remove", help="remove a job").add_argument("job_id")
    trace = commands.add_parser("trace", help="show a turn's trace (guard decisions, calls)")
    trace.add_argument(
        "turn", nargs="?", help="turn id or unique prefix (default: the latest turn)"
    )
    commands.add_parser("doctor", help="check configuration, model, workspace and channels")
    commands.add_parser("status", help="show what the gateway is doing")
    mcp_cli.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.home is not None:
        os.environ["SWITCHBOARD_HOME"] = str(args.home)
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 2
    quiet_console = args.command != "run" and not args.verbose
    configure_logging(
        level="debug" if args.verbose else settings.log_level,
        redactor=Redactor(secret_values(settings)),
        log_file=settings.data_dir / "logs" / "switchboard.log"
        if args.command in ("run", "chat")
        else None,
        console=not quiet_console,
    )
    try:
        return _dispatch(args, settings)
    except KeyboardInterrupt:
        return 130
    except AnotherInstanceRunning as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 3
    except SwitchboardError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "onboard":
        from gateway.runtime.home import onboard  # noqa: PLC0415 - keep start-up lean

        report = onboard(settings.home, settings.workspace_dir)
        for path in report.created:
            print(f"created  {path}")
        for path in report.kept:
            print(f"kept     {path} (already there)")
        print(
            f"\nNext: edit {settings.config_file} (or set SWITCHBOARD_LLM__* variables), then run "
            "`switchboard doctor` and `switchboard chat`."
        )
        return 0
    if args.command == "doctor":
        from gateway.cli.doctor import run_doctor  # noqa: PLC0415

        return asyncio.run(run_doctor(settings))
    if args.command == "status":
        from gateway.cli.doctor import print_status  # noqa: PLC0415

        return asyncio.run(print_status(settings))
    if args.command == "cron":
        return asyncio.run(cron_cli(settings, args.action, getattr(args, "job_id", None)))
    if args.command == "trace":
        return show_trace(settings, args.turn)
    if args.command == "mcp":
        return asyncio.run(mcp_cli.run(settings, args))
    if args.command == "pairing":
        from gateway.runtime.pairing import run_cli  # noqa: PLC0415

        return asyncio.run(run_cli(settings, args.action, args))
    from gateway.runtime.home import onboard  # noqa: PLC0415

    # First run: create what is missing; never overwrites a user's file.
    onboard(settings.home, settings.workspace_dir)
    if args.command == "chat":
        from gateway.cli.chat import chat  # noqa: PLC0415

        return asyncio.run(chat(settings, args.message))
    return asyncio.run(_run(settings))


async def _run(settings: Settings) -> int:
    from channels import build_channels  # noqa: PLC0415
    from channels.terminal import TerminalChannel, socket_path  # noqa: PLC0415
    from gateway.cli.stopping import Interrupts, stop_gateway  # noqa: PLC0415
    from gateway.runtime.app import Gateway  # noqa: PLC0415

    channels = build_channels(settings)
    if settings.web.enabled:  # the web chat; with it the gateway serves the web pages
        from channels.webchat import create as create_webchat  # noqa: PLC0415

        channels.append(create_webchat(settings))
    terminal = TerminalChannel(agent_name=settings.agent.name, model=settings.llm.model)
    gateway = Gateway(settings, channels=[*channels, terminal])
    # `switchboard chat` attaches here (gateway/cli/chat.py)
    terminal.serve(socket_path(settings.data_dir), lambda: gateway.wait_idle(terminal.name))
    with Interrupts() as interrupts:
        await gateway.start()
        if not channels:
            print(
                "switchboard: no channel is configured (set SWITCHBOARD_TELEGRAM__TOKEN, ...); "
                "use `switchboard chat` to talk in the terminal",
                file=sys.stderr,
            )
        if gateway.web is not None:
            print(f"web chat: {gateway.web.url}  status: {gateway.web.url}status", flush=True)
        print(f"switchboard {__version__} ready", flush=True)
        await interrupts.next()
        await stop_gateway(gateway, interrupts)
    return 0


def show_trace(settings: Settings, turn: str | None) -> int:
    from agent.guards.trace import find_trace, latest_trace, read_trace  # noqa: PLC0415

    directory = settings.data_dir / "traces"
    path = latest_trace(directory) if turn is None else find_trace(directory, turn)
    if path is None:
        print(
            f"switchboard: no single trace matches {turn or '(latest)'} in {directory}",
            file=sys.stderr,
        )
        return 1
    print(f"# {path.stem}")
    for event in read_trace(path):
        fields = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("t", "event"))
        print(f"{event.get('t', 0):>8.3f}s  {event.get('event', '?'):<14} {fields}")
    return 0


async def cron_cli(settings: Settings, action: str, job_id: str | None) -> int:
    """``switchboard cron list|remove``: works while the gateway runs (it re-checks a job
    before firing it)."""
    from gateway.store import Store  # noqa: PLC0415

    async with Store(settings.data_dir / "switchboard.db") as store:
        if action == "remove":
            assert job_id is not None
            if await store.jobs.remove(job_id):
                print(f"Removed job {job_id}.")
                return 0
            print(f"No active job {job_id}.", file=sys.stderr)
            return 1
        jobs = await store.jobs.active()
        if not jobs:
            print("No scheduled jobs.")
        for job in jobs:
            when = f"{job.next_run:%Y-%m-%d %H:%M %Z}" if job.next_run else "-"
            what = job.message or job.prompt or ""
            print(
                f"{job.id}  next {when}  {job.spec.describe()}  -> {job.chat.session_key}  {what[:60]}"
            )
    return 0
