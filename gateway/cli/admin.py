"""``switchboard pairing``, ``cron`` and ``trace``: who may talk, what is scheduled, what a turn
did. Each works while the gateway runs (the store allows a second process), and the
listings take ``--json``:

* ``pairing list --json``: ``[{"code", "channel", "sender_id", "sender_name", "state",
  "created_at", "expires_at"}]`` (times in epoch seconds);
* ``cron list --json``: ``[{"id", "schedule", "next_run", "target", "text", "task_type",
  "agent", "runs", "state"}]`` (``next_run`` ISO 8601 or null; ``state`` active or paused);
* ``trace --json``: ``{"turn", "file", "events": [{"t", "event", ...}]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config.settings import Settings
    from gateway.store import PairingRequest

    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    _register_pairing(commands, common)
    _register_cron(commands, common)
    text = "Show a turn's trace: model calls, tool calls and guard decisions, with timings."
    trace = commands.add_parser("trace", parents=[common], help="what a turn did", description=text)
    trace.add_argument(
        "turn", nargs="?", help="turn id or unique prefix (default: the latest turn)"
    )
    trace.add_argument("--json", action="store_true", help="print the trace as JSON")
    trace.set_defaults(handler=lambda args, settings: show_trace(settings, args.turn, args.json))


def _register_pairing(commands: Commands, common: argparse.ArgumentParser) -> None:
    from gateway.config.plugins import channel_plugins  # noqa: PLC0415

    text = (
        "Decide who may talk to the bot: unknown senders get a pairing code; approve or deny "
        "it here, or revoke a paired user."
    )
    pairing = commands.add_parser(
        "pairing", parents=[common], help="approve who may talk to the bot", description=text
    )
    actions = pairing.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common], help="pending codes and paired users", description=text
    )
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    clear = actions.add_parser(
        "clear",
        parents=[common],
        help="deny every open pairing request",
        description="Deny every open pairing request (of one channel, when given).",
    )
    clear.add_argument("channel", nargs="?", help="only this channel's requests")
    for verb in ("approve", "deny"):
        decide = actions.add_parser(
            verb,
            parents=[common],
            help=f"{verb} a pairing code",
            description=f"{verb.capitalize()} a pending pairing code (`pairing list` shows them).",
        )
        decide.add_argument("code")
        if verb == "approve":
            decide.add_argument(
                "--owner",
                action="store_true",
                help="the code is yours: also make this address an owner of its channel "
                "(added to <channel>.owners in config.toml; the running gateway applies it)",
            )
    revoke = actions.add_parser(
        "revoke",
        parents=[common],
        help="remove a paired user",
        description=f"Remove a paired user of a channel ({', '.join(channel_plugins())}).",
    )
    revoke.add_argument("channel")
    revoke.add_argument("user_id")
    pairing.set_defaults(handler=lambda args, settings: asyncio.run(pairing_cli(settings, args)))


JOB_ID = "the job's id, or the start of it (as `cron list` shows it)"


def _register_cron(commands: Commands, common: argparse.ArgumentParser) -> None:
    text = 'Scheduled jobs (people create them by asking: "remind me at 9").'
    cron = commands.add_parser(
        "cron",
        parents=[common],
        help="list, pause, resume or remove scheduled jobs",
        description=text,
    )
    actions = cron.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common], help="every job still to run, paused ones too", description=text
    )
    listing.add_argument("--json", action="store_true", help="print the jobs as JSON")
    actions.add_parser(
        "remove", parents=[common], help="remove a job", description="Remove a job by id."
    ).add_argument("job_id", help=JOB_ID)
    actions.add_parser(
        "pause",
        parents=[common],
        help="pause a job",
        description="Keep a job but run it no more until `cron resume` (the control center's Pause).",
    ).add_argument("job_id", help=JOB_ID)
    actions.add_parser(
        "resume",
        parents=[common],
        help="resume a paused job",
        description="Run a paused job again from its next time.",
    ).add_argument("job_id", help=JOB_ID)
    cron.set_defaults(handler=lambda args, settings: asyncio.run(cron_cli(settings, args)))


async def pairing_cli(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.core.textutil import shown_name  # noqa: PLC0415
    from gateway.runtime.intake.pairing import PairingDesk, describe  # noqa: PLC0415
    from gateway.runtime.storage import store_for  # noqa: PLC0415

    by = f"cli:{getpass.getuser()}"
    if args.action == "revoke" and args.channel not in settings.channel_sections():
        known = ", ".join(settings.channel_sections())
        print(f"Unknown channel {args.channel!r}: pairing is for {known}.", file=sys.stderr)
        return 1
    async with store_for(settings, migrates=False) as store:
        desk = PairingDesk.of(store)
        if args.action == "list":
            requests = await store.pairings.listing()
            if args.json:
                print(json.dumps([asdict(r) for r in requests], indent=2))
            elif not requests:
                print("No pairing requests and no paired users.")
            else:
                print("\n".join(describe(r) for r in requests))
                print(*_ownerless_hint(settings, requests), sep="\n")
            return 0
        if args.action == "clear":
            count = await desk.clear(by=by, channel=args.channel)
            print(f"Cleared {count} open pairing request(s).")
            return 0
        if args.action in ("approve", "deny"):
            request = await desk.decide(args.code, approve=args.action == "approve", by=by)
            if request is None:
                print(
                    f"No pending request with code {args.code.upper()} (expired, unknown or "
                    "already decided); `switchboard pairing list` shows them.",
                    file=sys.stderr,
                )
                return 1
            name = shown_name(request.sender_name) if request.sender_name else "no name"
            print(
                f"{args.action.capitalize()}d {request.channel} user {request.sender_id} ({name})."
            )
            if args.action == "approve" and args.owner:
                return make_owner(settings, request.channel, request.sender_id)
            section = settings.channel_sections().get(request.channel)
            if args.action == "approve" and section is not None and not section.owners:
                print(
                    f"note: {request.channel} has no owner yet; if that was you, "
                    f"`switchboard config set {request.channel}.owners "
                    f"'[\"{request.sender_id}\"]'` makes you its owner "
                    "(next time: `pairing approve CODE --owner`)"
                )
            return 0
        if await desk.revoke(args.channel, args.user_id, by=by):
            print(f"Revoked {args.channel} user {args.user_id}.")
            return 0
        print(f"{args.user_id} is not a paired user on {args.channel}.", file=sys.stderr)
        return 1


def _ownerless_hint(settings: Settings, requests: list[PairingRequest]) -> list[str]:
    """For the owner only (strangers are never told): how a code of their own account is
    approved on a channel that has no owner yet."""
    sections = settings.channel_sections()
    ownerless = sorted(
        {
            r.channel
            for r in requests
            if r.state == "pending" and r.channel in sections and not sections[r.channel].owners
        }
    )
    if not ownerless:
        return []
    return [
        f"note: {', '.join(ownerless)} has no owner yet; a code your own account got there: "
        "`switchboard pairing approve CODE --owner` (you are its owner from then on)"
    ]


def make_owner(settings: Settings, channel: str, sender_id: str) -> int:
    """Add ``sender_id`` to ``<channel>.owners`` in config.toml (those the file lists kept)."""
    from gateway.cli.config import write_setting  # noqa: PLC0415
    from gateway.config.toml.config_file import config_text  # noqa: PLC0415
    from gateway.config.toml.edit import get_key  # noqa: PLC0415

    key = f"{channel}.owners"
    listed = get_key(config_text(settings.config_file), key)
    owners = [str(owner) for owner in listed] if isinstance(listed, list) else []
    if sender_id in owners:
        print(f"{sender_id} is an owner of {channel} already ({key}).")
        return 0
    by = "this `switchboard pairing approve --owner`"
    return write_setting(settings, key, [*owners, sender_id], by=by)


async def cron_cli(settings: Settings, args: argparse.Namespace) -> int:
    """``switchboard cron list|remove``: works while the gateway runs (it re-checks a job
    before firing it)."""
    from gateway.core.schedule_spec import zone  # noqa: PLC0415
    from gateway.runtime.storage import store_for  # noqa: PLC0415

    async with store_for(settings, migrates=False) as store:
        if args.action in ("remove", "pause", "resume"):
            change = {
                "remove": (store.jobs.remove, "Removed", "active or paused"),
                "pause": (store.jobs.pause, "Paused", "active"),
                "resume": (store.jobs.resume, "Resumed", "paused"),
            }
            act, done, state = change[args.action]
            ids = [job.id for job in await store.jobs.listing()]
            matches = [i for i in ids if i == args.job_id] or [
                i for i in ids if i.startswith(args.job_id)
            ]
            if len(matches) > 1:
                print(
                    f"{args.job_id} could be any of {', '.join(matches)}: give more of the id.",
                    file=sys.stderr,
                )
                return 1
            job_id = matches[0] if matches else args.job_id
            if await act(job_id):
                print(f"{done} job {job_id}.")
                return 0
            print(f"No {state} job {args.job_id}.", file=sys.stderr)
            return 1
        jobs = await store.jobs.listing()
        rows = [
            {
                "id": job.id,
                "schedule": job.spec.describe(),
                "next_run": job.next_run.isoformat() if job.next_run else None,
                "target": job.chat.session_key,
                "text": job.message or job.prompt or "",
                "task_type": job.task_type,
                "agent": job.agent,
                "runs": job.runs,
                "state": job.state,
            }
            for job in jobs
        ]
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        if not jobs:
            print("No scheduled jobs.")
        for job in jobs:
            local = job.next_run.astimezone(zone(job.spec.timezone)) if job.next_run else None
            when = f"{local:%Y-%m-%d %H:%M %Z}" if local else "-"  # in its schedule's zone
            if job.state == "paused":
                when = "paused"
            what = job.message or job.prompt or ""
            print(
                f"{job.id}  next {when}  {job.spec.describe()}  -> {job.chat.session_key}  "
                f"{what[:60]}"
            )
    return 0


def show_trace(settings: Settings, turn: str | None, as_json: bool = False) -> int:
    from agent.guards.trace import find_trace, latest_trace, read_trace  # noqa: PLC0415

    directory = settings.data_dir / "traces"
    path = latest_trace(directory) if turn is None else find_trace(directory, turn)
    if path is None:
        if turn is None:
            message = (
                f"No turns traced yet (nothing in {directory}); talk to the agent first, "
                "e.g. `switchboard chat -m hello`."
            )
        else:
            message = (
                f"No single trace matches {turn!r} in {directory} (unknown, or the prefix "
                "fits several turns); `switchboard trace` shows the latest."
            )
        print(message, file=sys.stderr)
        return 1
    events = read_trace(path)
    if as_json:
        report: dict[str, Any] = {"turn": path.stem, "file": str(path), "events": events}
        print(json.dumps(report, indent=2))
        return 0
    print(f"# {path.stem}")
    for event in events:
        fields = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("t", "event"))
        print(f"{event.get('t', 0):>8.3f}s  {event.get('event', '?'):<14} {fields}")
    return 0
