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
    from collections.abc import Mapping

    from gateway.config.settings import Settings
    from gateway.runtime.intake.revoke import Written
    from gateway.store import PairingRequest
    from gateway.web.view import Revoked

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
    trace.set_defaults(
        handler=lambda args, settings: show_trace(settings, args.turn, args.json),
        needs_settings="running",
        reads_home=True,
    )


def _register_pairing(commands: Commands, common: argparse.ArgumentParser) -> None:
    from gateway.config.plugins import channel_plugins  # noqa: PLC0415

    text = (
        "Decide who may talk to the bot: unknown senders get a pairing code; approve or deny "
        "it here, or revoke someone's access."
    )
    pairing = commands.add_parser(
        "pairing", parents=[common], help="approve who may talk to the bot", description=text
    )
    actions = pairing.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="pending codes and paired users",
        description="List the pairing codes waiting for a decision and the people approved.",
    )
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    clear = actions.add_parser(
        "clear",
        parents=[common],
        help="deny every open pairing request",
        description="Deny every open pairing request (of one channel, when given).",
    )
    clear.add_argument("channel", nargs="?", help="only this channel's requests")
    decisions = {
        "approve": "Approve a pending pairing code (`pairing list` shows them); the person is "
        "welcomed at once.",
        "deny": "Deny a pending pairing code (`pairing list` shows them); the person is not "
        "told, and a new code is theirs only after this one would have expired.",
    }
    for verb, description in decisions.items():
        decide = actions.add_parser(
            verb, parents=[common], help=f"{verb} a pairing code", description=description
        )
        decide.add_argument("code", help="the code the bot gave them (`pairing list` shows it)")
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
        help="take away someone's access",
        description=(
            "Take away a person's access on a channel: their pairing, and their place in "
            "<channel>.owners, admins and allow_from (and a group's allow_from) in "
            "config.toml; the running gateway applies it."
        ),
    )
    revoke.add_argument("channel", help=f"the channel ({', '.join(channel_plugins())})")
    revoke.add_argument("user_id", help="their id on it (as `pairing list` shows it)")
    pairing.set_defaults(handler=pairing_command, reads_home=True)


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
        "list",
        parents=[common],
        help="every job still to run, paused ones too",
        description="List every job still to run, paused ones too, with its next run in its "
        "schedule's time zone.",
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
    cron.set_defaults(
        handler=lambda args, settings: asyncio.run(cron_cli(settings, args)), reads_home=True
    )


def pairing_command(args: argparse.Namespace, settings: Settings) -> int:
    """``switchboard pairing``: each step that opens the store runs on its own, so a change
    to config.toml after it (``approve --owner``, ``revoke``) waits for the running gateway
    outside of it."""
    channel = getattr(args, "channel", None)
    if channel is not None and channel not in settings.channel_sections():  # revoke, clear
        known = ", ".join(settings.channel_sections())
        print(f"switchboard: unknown channel {channel!r}: pairing is for {known}.", file=sys.stderr)
        return 1
    if args.action == "revoke":
        return revoke_access(settings, args.channel, args.user_id)
    if args.action in ("approve", "deny"):
        return decide(
            settings,
            args.code,
            approve=args.action == "approve",
            owner=getattr(args, "owner", False),
        )
    return asyncio.run(pairing_cli(settings, args))


async def pairing_cli(settings: Settings, args: argparse.Namespace) -> int:
    """``pairing list`` and ``pairing clear``."""
    from gateway.runtime.intake.pairing import PairingDesk, describe  # noqa: PLC0415
    from gateway.runtime.storage import store_for  # noqa: PLC0415

    async with store_for(settings, migrates=False) as store:
        if args.action == "clear":
            count = await PairingDesk.of(store).clear(by=_by(), channel=args.channel)
            print(f"Cleared {count} open pairing request(s).")
            return 0
        requests = await store.pairings.listing()
        if args.json:
            print(json.dumps([asdict(r) for r in requests], indent=2))
        elif not requests:
            print("No pairing requests and no paired users.")
        else:
            print("\n".join(describe(r) for r in requests))
            print(*_ownerless_hint(settings, requests), sep="\n")
        return 0


def _by() -> str:
    return f"cli:{getpass.getuser()}"


def decide(settings: Settings, code: str, *, approve: bool, owner: bool = False) -> int:
    """Approve (the person is welcomed) or deny (they are not told) the request ``code``;
    ``owner``: the approved address becomes an owner of its channel too."""
    from gateway.core.text.textutil import shown_name  # noqa: PLC0415
    from gateway.runtime.intake.pairing import PairingDesk  # noqa: PLC0415
    from gateway.runtime.storage import store_for  # noqa: PLC0415

    async def decided() -> PairingRequest | None:
        async with store_for(settings, migrates=False) as store:
            return await PairingDesk.of(store).decide(code, approve=approve, by=_by())

    request = asyncio.run(decided())
    if request is None:
        print(
            f"switchboard: no pending request with code {code.upper()} (expired, unknown or "
            "already decided); `switchboard pairing list` shows them.",
            file=sys.stderr,
        )
        return 1
    name = shown_name(request.sender_name) if request.sender_name else "no name"
    done = "Approved" if approve else "Denied"
    print(f"{done} {request.channel} user {request.sender_id} ({name}).")
    if approve and owner:
        return make_owner(settings, request.channel, request.sender_id)
    section = settings.channel_sections().get(request.channel)
    if approve and section is not None and not section.owners:
        print(
            f"note: {request.channel} has no owner yet; if that was you, "
            f"`switchboard config set {request.channel}.owners "
            f"'[\"{request.sender_id}\"]'` makes you its owner "
            "(next time: `pairing approve CODE --owner`)"
        )
    return 0


def revoke_access(settings: Settings, channel: str, sender_id: str) -> int:
    """Take ``sender_id``'s access on ``channel`` away, as the control center and ``/pair
    revoke`` do (:mod:`gateway.runtime.intake.revoke`): their pairing, and their place in
    the lists of config.toml that let them in or make them an owner or admin (``approve
    --owner`` put them in ``owners``), written as ``config set`` writes (and waiting for a
    running gateway to apply it). Says what was revoked, and what still lets them in when
    something does: a list set in the environment or ``.env`` (which this cannot change:
    exit 1), a ``*`` or an open policy, or another address of the same person."""
    from gateway.runtime.intake.revoke import Revocation  # noqa: PLC0415
    from gateway.runtime.storage import store_for  # noqa: PLC0415

    access = _FileAccess(settings)

    async def revoked() -> Revoked:
        async with store_for(settings, migrates=False) as store:
            return await Revocation.of(store, access).revoke(channel, sender_id, by=_by())

    result = asyncio.run(revoked())
    if not result.done:
        if not access.refused:  # a refused change of config.toml said why already
            hint = "" if result.still else " (`switchboard pairing list` shows who is paired)."
            print(f"switchboard: {result.why_not()}{hint}", file=sys.stderr)
        return 1
    print(result.summary())
    for line in result.still:
        print(f"switchboard: still {line}", file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}")
    return 1 if result.still else 0


class _FileAccess:
    """config.toml as this command changes it
    (:class:`~gateway.runtime.intake.revoke.AccessConfig`): written as ``config
    set`` writes it, which says what it wrote and waits for a running gateway to apply it."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._written = False
        self.refused = False  # config set's refusal was printed

    def current(self) -> Settings:
        from gateway.config.settings import load_settings  # noqa: PLC0415

        return load_settings(home=self._settings.home) if self._written else self._settings

    async def write(self, edits: Mapping[str, list[str]], *, by: str) -> Written:
        from gateway.cli.config import write_settings  # noqa: PLC0415
        from gateway.runtime.intake.revoke import Written  # noqa: PLC0415

        command = "this `switchboard pairing revoke`"
        # on a thread: it waits for the running gateway, and asks a cluster's nodes
        if await asyncio.to_thread(write_settings, self._settings, edits, by=command) != 0:
            self.refused = True  # it said why
            return Written(refused="config.toml was not changed")
        self._written = True
        return Written()


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
            states = {job.id: job.state for job in await store.jobs.listing()}
            matches = [i for i in states if i == args.job_id] or [
                i for i in states if i.startswith(args.job_id)
            ]
            if len(matches) > 1:
                print(
                    f"switchboard: {args.job_id} could be any of {', '.join(matches)}: give "
                    "more of the id.",
                    file=sys.stderr,
                )
                return 1
            job_id = matches[0] if matches else args.job_id
            if await act(job_id):
                print(f"{done} job {job_id}.")
                return 0
            if job_id in states and states[job_id] not in state:  # paused, or active
                already = f"is {states[job_id]} already"
                print(f"switchboard: job {job_id} {already}.", file=sys.stderr)
                return 1
            print(
                f"switchboard: no {state} job {args.job_id} (`switchboard cron list` shows them).",
                file=sys.stderr,
            )
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
            when = f"next {local:%Y-%m-%d %H:%M %Z}" if local else "next -"  # its zone's
            if job.state == "paused":
                when = "paused"
            what = job.message or job.prompt or ""
            print(
                f"{job.id}  {when}  {job.spec.describe()}  -> {job.chat.session_key}  {what[:60]}"
            )
    return 0


def show_trace(settings: Settings, turn: str | None, as_json: bool = False) -> int:
    from agent.guards.trace import find_trace, latest_trace, read_trace  # noqa: PLC0415

    directory = settings.data_dir / "traces"
    path = latest_trace(directory) if turn is None else find_trace(directory, turn)
    if path is None:
        if turn is None:
            message = (
                f"no turns traced yet (nothing in {directory}); talk to the agent first, "
                "e.g. `switchboard chat -m hello`."
            )
        else:
            message = (
                f"no single trace matches {turn!r} in {directory} (unknown, or the prefix "
                "fits several turns); `switchboard trace` shows the latest."
            )
        print(f"switchboard: {message}", file=sys.stderr)
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
