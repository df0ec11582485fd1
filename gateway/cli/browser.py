"""``switchboard browser list | create | delete``: the browser tool's profiles, the owner's to
make and remove (agent/web/profiles.py).

A profile keeps what the ``browser`` tool's session holds (cookies, site storage) between
runs: with one, a site signed in to once stays signed in; without one, a session forgets it
all when it closes. ``create`` makes the agent's profile (its owner's and admins' session),
or with ``--person channel:id`` a member's own; ``delete`` forgets every site it was signed
in to (a running gateway's open session stops keeping it at its next step). The model can
neither make nor delete one.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from gateway.core.addressing import DEFAULT_AGENT

if TYPE_CHECKING:
    from agent.web.profiles import Profiles
    from gateway.config.settings import Settings

DESCRIPTION = (
    "The browser tool's profiles: where its sessions keep cookies between runs, so a site "
    "signed in to once stays signed in. `list` shows them, `create` makes the agent's "
    "profile (its owner's and admins' session; `--person channel:id` a member's own), "
    "`delete` forgets every site it was signed in to. Kept in $SWITCHBOARD_HOME/data/browser "
    "(mode 0600)."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "browser",
        parents=[common],
        help="the browser tool's profiles (list, create, delete)",
        description=DESCRIPTION,
    )
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="the profiles and the sites they hold cookies for",
        description="Print each profile: its agent, whose it is, and the sites it holds "
        "cookies for.",
    )
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    for name, text, description in (
        (
            "create",
            "make a profile, so the session keeps its sign-ins",
            "Make a profile, so the browser tool's sessions keep their sign-ins between runs.",
        ),
        (
            "delete",
            "delete a profile: every site it was signed in to is forgotten",
            "Delete a profile: every site it was signed in to is forgotten.",
        ),
    ):
        action = actions.add_parser(name, parents=[common], help=text, description=description)
        action.add_argument(
            "--agent", default=DEFAULT_AGENT, help=f"the agent (default: {DEFAULT_AGENT})"
        )
        action.add_argument(
            "--person", help="a member's own profile, as channel:id (default: the agent's own)"
        )
    command.set_defaults(handler=browser_command)


def browser_command(args: argparse.Namespace, settings: Settings) -> int:
    from agent.web.profiles import ProfileError, Profiles  # noqa: PLC0415

    profiles = Profiles(settings.data_dir / "browser")
    if args.action == "list":
        return _list(profiles, as_json=args.json)
    agents = (DEFAULT_AGENT, *settings.agents)
    if args.agent not in agents:
        print(
            f"switchboard: no agent is named {args.agent!r} (agents: {', '.join(agents)})",
            file=sys.stderr,
        )
        return 1
    person = args.person
    if person is not None and ":" not in person:
        print(
            f"switchboard: --person {person!r}: give the channel and the person's id, "
            "such as telegram:123456",
            file=sys.stderr,
        )
        return 1
    whose = f"{person}'s" if person else f"agent {args.agent}'s"
    try:
        if args.action == "create":
            path = profiles.create(args.agent, person)
            print(f"created {whose} browser profile {path}: its sign-ins are kept from now on")
        else:
            path = profiles.delete(args.agent, person)
            print(f"deleted {whose} browser profile {path}: every site it held is forgotten")
    except ProfileError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1
    return 0


def _list(profiles: Profiles, *, as_json: bool) -> int:
    found = profiles.listing()
    if as_json:
        rows = [
            {
                "agent": p.agent,
                "person": p.person,
                "path": str(p.path),
                "sites": list(p.sites),
                "bytes": p.size,
            }
            for p in found
        ]
        print(json.dumps(rows, indent=2))
        return 0
    if not found:
        print(
            "no browser profiles: the browser tool forgets its sign-ins when a session "
            "closes; `switchboard browser create` makes the agent's profile"
        )
    for profile in found:
        whose = profile.person or "owner and admins"
        sites = ", ".join(profile.sites) or "no sites yet"
        print(f"{profile.agent}  {whose}  {sites}  ({profile.path})")
    return 0
