"""``switchboard skills list|search|show|install|update|remove|verify``: skills people can
install, pinned and held to what they declare (docs/tools.md#installing-skills).

``install SOURCE`` takes a folder, ``git+https://host/repo.git@ref#folder``, an archive URL
or a name from ``skills.registries``; it shows what the skill is and may do (tools, hosts,
paths, secrets, scripts, anything suspicious in it) and asks, or goes on with ``--yes``.
``update`` fetches the source again and asks again, naming what the skill may do now that it
could not before. ``verify`` names every skill whose files changed since they were
approved (the gateway leaves those out until ``verify --approve NAME``). The commands work on
the files, whether or not the gateway runs: a running gateway sees a change at its next turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.core.addressing import DEFAULT_AGENT

if TYPE_CHECKING:
    from agent.skills.downloads import Reach
    from agent.skills.install import Installer
    from agent.skills.library import SkillLibrary
    from agent.skills.registry import IndexEntry
    from agent.skills.review import Review
    from gateway.config.settings import Settings

Ask = Callable[[str], bool]
NO_REGISTRIES = (
    "no skill registries are configured, so there is nothing to search: add one with "
    """switchboard config set skills.registries '["https://skills.example.org/index.json"]'"""
)
# Lines of a changed skill's diff shown on the terminal: of each file, and in all.
CHANGE_PER_FILE, CHANGE_LINES = 400, 2000

DESCRIPTION = (
    "Install skills from a folder, a git repository at a ref, an archive URL or a registry "
    "(skills.registries), with the sha256 of every file pinned in skills/skills.lock; list, "
    "search, show, update, remove them, and verify that none changed since it was approved."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "skills", parents=[common], help="install and check skills", description=DESCRIPTION
    )
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(
        name: str, text: str, description: str, *, json_output: bool = False
    ) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, parents=[common], help=text, description=description)
        parser.add_argument(
            "--agent", default=DEFAULT_AGENT, help="the agent whose workspace (default: main)"
        )
        if json_output:
            parser.add_argument("--json", action="store_true", help="print JSON")
        return parser

    action(
        "list",
        "the installed skills, what each may do, and whether it changed",
        "List the installed skills: what each may do, and whether its files changed since "
        "they were approved.",
        json_output=True,
    )
    action(
        "search",
        "search the registries' indexes",
        "Search the indexes of the registries in skills.registries for TERM.",
        json_output=True,
    ).add_argument("term", help="words of the skill's name or description")
    action(
        "show",
        "one skill, installed or in a registry",
        "Show one skill, installed or in a registry: what it does and what it may use.",
        json_output=True,
    ).add_argument("name", help="the skill's name (as `skills list` or `skills search` shows)")
    install = action(
        "install",
        "install a skill from a SOURCE after showing what it may do",
        "Install a skill from SOURCE after showing what it may do; every file's sha256 is "
        "pinned in the lock file.",
    )
    install.add_argument(
        "source", help="a folder, git+https://...git@REF#FOLDER, an archive URL, or a name"
    )
    install.add_argument("--sha256", help="the archive's expected sha256 (for an archive URL)")
    install.add_argument(
        "--when",
        action="append",
        default=[],
        metavar="PHRASE",
        help="a phrase (or /pattern/) that loads the skill, besides its own when: (repeatable)",
    )
    install.add_argument("--yes", action="store_true", help="install without asking")
    update = action(
        "update",
        "fetch installed skills again; ask about what changed",
        "Fetch installed skills again from where they came from, and ask about what changed.",
    )
    update.add_argument("name", nargs="?", help="one skill (default: every installed one)")
    update.add_argument("--yes", action="store_true", help="update without asking")
    remove = action(
        "remove", "delete a skill and its lock entry", "Delete a skill and its lock entry."
    )
    remove.add_argument("name", help="the installed skill's name")
    verify = action(
        "verify",
        "check every skill's files against the lock file",
        "Check every skill's files against the lock file; a skill that changed is left out "
        "until approved again (--approve).",
        json_output=True,
    )
    verify.add_argument("--approve", metavar="NAME", help="approve NAME's files as they are now")
    verify.add_argument("--yes", action="store_true", help="approve without asking")
    command.set_defaults(handler=lambda args, settings: asyncio.run(run(settings, args)))


async def run(
    settings: Settings,
    args: argparse.Namespace,
    *,
    reach: Reach | None = None,
    ask: Ask | None = None,
) -> int:
    """One ``skills`` command. ``reach`` says where downloads may go (public https unless a
    test says otherwise: :meth:`agent.skills.downloads.Reach.for_tests`); ``ask`` confirms."""
    from agent.skills.install import InstallError  # noqa: PLC0415
    from agent.skills.lock import LockError  # noqa: PLC0415
    from agent.skills.review import ReviewError  # noqa: PLC0415

    confirm = ask or _asker(getattr(args, "yes", False))
    try:
        installer = _installer(settings, args.agent, reach)
        if args.action == "list":
            return _list(installer, as_json=args.json)
        if args.action == "search":
            return await _search(installer, args.term, as_json=args.json)
        if args.action == "show":
            return await _show(installer, args.name, as_json=args.json)
        if args.action == "install":
            return await _install(installer, args, confirm)
        if args.action == "update":
            return await _update(installer, args.name, confirm)
        if args.action == "remove":
            installer.remove(args.name)
            print(f"Removed {args.name}.")
            return 0
        return _verify(installer, args, confirm)
    except (InstallError, ReviewError, LockError, ValueError) as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1


def _installer(settings: Settings, agent: str, reach: Reach | None) -> Installer:
    from agent.skills.downloads import Downloads  # noqa: PLC0415
    from agent.skills.install import Installer  # noqa: PLC0415
    from agent.skills.library import SkillLibrary  # noqa: PLC0415
    from agent.skills.registry import Registries  # noqa: PLC0415
    from gateway.runtime.agents.assembly import agent_settings  # noqa: PLC0415

    if agent != DEFAULT_AGENT and agent not in settings.agents:
        known = ", ".join([DEFAULT_AGENT, *settings.agents])
        raise ValueError(f"no agent named {agent!r} (known: {known})")
    workspace = agent_settings(settings, agent).workspace_dir
    downloads = Downloads(reach)
    return Installer(
        SkillLibrary(
            workspace / "skills",
            configured_secrets=settings.skills.secrets,
            mcp_servers=settings.mcp.servers,
        ),
        downloads=downloads,
        registries=Registries(settings.skills.registries, downloads),
    )


def _list(installer: Installer, *, as_json: bool) -> int:
    from agent.skills.proposals import Proposals  # noqa: PLC0415
    from agent.skills.review import unknown_tools  # noqa: PLC0415

    library = installer.library
    skills = {s.folder.name: s for s in library.skills()}
    rows: list[dict[str, Any]] = []
    for status in installer.statuses():
        skill = skills.get(status.name)
        entry = status.entry
        unknown = [] if skill is None else unknown_tools(skill, library.mcp_servers)
        rows.append(
            {
                "name": status.name,
                "state": status.state,
                "detail": status.detail,
                "version": entry.version if entry else "",
                "kind": entry.kind if entry else "",
                "source": entry.source if entry else "",
                "description": skill.description if skill else "",
                "loaded": skill is not None,  # left out (changed, broken, missing): not
                "may_use": _permissions(library, status.name),
                "unknown_tools": [tool for tool, _ in unknown],
                "warnings": [f"SKILL.md {why}" for _, why in unknown],
            }
        )
    waiting = [p.name for p in Proposals(library).pending()]
    if as_json:
        print(json.dumps({"skills": rows, "proposals": waiting}, indent=2))
        return 0
    if not rows:
        print(f"No skills in {library.directory}.")
    for row in rows:
        version = f" {row['version']}" if row["version"] else ""
        unknown = row["unknown_tools"]
        state = f"unknown tool {', '.join(unknown)}" if unknown else row["state"]
        print(f"{row['name']}{version}  [{state}]{_source(row)}")
        if row["description"]:
            print(f"  {row['description']}")
        if row["detail"]:
            print(f"  {row['detail']}")
        for warning in row["warnings"]:
            print(f"  WARNING: {warning}")
        if row["loaded"]:
            print(f"  may use: {_may(row['may_use'])}")
        else:
            print("  not used: no turn loads it until it is fixed, or approved again")
    if waiting:
        print(
            f"Proposed by the assistant, waiting for the owner (/skills in the chat): {', '.join(waiting)}"
        )
    return 0


def _source(row: dict[str, Any]) -> str:
    """Where a listed skill came from: ``from`` a folder, a URL or a registry; the
    assistant's proposal and a skill written here say so themselves."""
    if not row["source"]:
        return ""
    return (
        f"  {row['source']}" if row["kind"] in ("proposal", "local") else f"  from {row['source']}"
    )


def _permissions(library: SkillLibrary, name: str) -> dict[str, Any] | None:
    """What the skill may use; ``None`` when it is not held to anything (hand-written)."""
    skill = next((s for s in library.skills() if s.folder.name == name), None)
    if skill is None or not skill.bounded:
        return None
    p = skill.permissions
    return {
        "tools": list(p.tools),
        "network": list(p.network),
        "paths": list(p.paths),
        "secrets": list(p.secrets),
    }


def _may(permissions: dict[str, Any] | None) -> str:
    if permissions is None:
        return "whatever the person may (written by hand, declares nothing)"
    parts = [f"{k} {', '.join(v)}" for k, v in permissions.items() if v]
    return "; ".join(parts) or "nothing: it can only be read"


async def _search(installer: Installer, term: str, *, as_json: bool) -> int:
    if not installer.registries.urls:
        print(f"switchboard: {NO_REGISTRIES}", file=sys.stderr)
        return 1
    listing = await installer.registries.search(term)
    for problem in listing.problems:
        print(f"switchboard: {problem}", file=sys.stderr)
    if as_json:
        print(json.dumps([_entry(e) for e in listing.entries], indent=2))
    for entry in [] if as_json else listing.entries:
        print(f"{entry.name} {entry.version}  {entry.description}")
    if not listing.entries and not as_json:
        print(f"No skill matches {term!r}.")
    return 0 if listing.entries else 1


async def _show(installer: Installer, name: str, *, as_json: bool) -> int:
    from agent.skills.registry import RegistryError  # noqa: PLC0415
    from agent.skills.review import review_installed  # noqa: PLC0415

    library = installer.library
    if (library.directory / name).is_dir():
        review = review_installed(library, name)
        entry = library.lock.get(name)
        if as_json:
            print(
                json.dumps(
                    {
                        "name": name,
                        "installed": True,
                        "description": review.skill.description,
                        "source": entry.source if entry else "",
                        "version": entry.version if entry else "",
                        "origin": entry.origin if entry else "",
                        "approved": entry.approved if entry else "",
                        "changed": bool(review.changes),
                        "may_use": _permissions(library, name),
                        "files": review.files,
                        "change": review.change_lines(per_file=CHANGE_PER_FILE, total=CHANGE_LINES)[
                            0
                        ],
                        "warnings": list(review.warnings),
                    },
                    indent=2,
                )
            )
            return 0
        for line in review.lines():
            print(line)
        _print_change(review)
        if entry is not None:
            origin = f" ({entry.origin})" if entry.origin not in ("", entry.source) else ""
            print(f"  source: {entry.source}{origin}")
            print(
                f"  approved: {entry.approved}"
                + (f", version {entry.version}" if entry.version else "")
            )
        return 0
    try:
        found = await installer.registries.find(name)
    except RegistryError as exc:
        print(f"switchboard: {name} is not installed, and {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps({**_entry(found), "installed": False}, indent=2))
    else:
        print(f"{found.name} {found.version} (not installed)\n  {found.description}")
        print(f"  archive: {found.url}\n  sha256: {found.sha256}\n  registry: {found.registry}")
        print(f"  install: switchboard skills install {found.name}")
    return 0


async def _install(installer: Installer, args: argparse.Namespace, confirm: Ask) -> int:
    async with installer.plan(args.source, sha256=args.sha256, when=tuple(args.when)) as plan:
        for line in plan.lines():
            print(line)
        if not confirm(f"Install {plan.name}?"):
            print("Not installed.")
            return 1
        installer.commit(plan)
    print(f"Installed {plan.name} in {installer.directory / plan.name}.")
    return 0


async def _update(installer: Installer, name: str | None, confirm: Ask) -> int:
    from agent.skills.install import InstallError  # noqa: PLC0415

    entries = installer.lock.entries()
    names = (
        [name] if name else [n for n, e in entries.items() if e.kind not in ("proposal", "local")]
    )
    failed = 0
    for each in names:
        try:
            async with installer.update_plan(each) as plan:
                if plan is None:
                    print(f"{each} is up to date.")
                    continue
                for line in plan.lines():
                    print(line)
                _print_change(plan.review)
                if confirm(f"Update {each}?"):
                    installer.commit(plan)
                    print(f"Updated {each}.")
                else:
                    print(f"{each} not updated.")
        except InstallError as exc:
            print(f"switchboard: {each}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _verify(installer: Installer, args: argparse.Namespace, confirm: Ask) -> int:
    from agent.skills.review import ReviewError, approve, review_installed  # noqa: PLC0415

    if args.approve:
        review = review_installed(installer.library, args.approve)
        for line in review.lines():
            print(line)
        _print_change(review)
        if not confirm(f"Approve {args.approve} as it is now?"):
            print("Not approved.")
            return 1
        approve(installer.library, review)
        if review.hand_written:
            print(
                f"Pinned {args.approve}: from the next turn on it may use only what it "
                f"declares; after you edit it, approve it again (switchboard skills verify "
                f"--approve {args.approve})."
            )
        else:
            print(f"Approved {args.approve}: it is used again from the next turn on.")
        return 0
    statuses = installer.statuses()
    bad = [s for s in statuses if s.state in ("changed", "missing", "broken")]
    if args.json:
        rows = [{"name": s.name, "state": s.state, "detail": s.detail} for s in statuses]
        print(json.dumps(rows, indent=2))
        return 1 if bad else 0
    for status in statuses:
        detail = f": {status.detail}" if status.detail else ""
        print(f"{status.name}  {status.state}{detail}")
        if status.state == "changed":
            with contextlib.suppress(ReviewError):
                _print_change(review_installed(installer.library, status.name))
    if bad:
        names = " ".join(s.name for s in bad if s.state == "changed")
        if names:
            print(
                f"Changed skills are not used until approved again: "
                f"switchboard skills verify --approve NAME ({names})"
            )
        return 1
    print(f"{len(statuses)} skill(s) checked; none changed since approved.")
    return 0


def _print_change(review: Review) -> None:
    """What changed in a skill's files since they were approved: a diff of each text file
    against the approved copy (characters that would hide or reorder text spelled out)."""
    from gateway.core.text.verbatim import visible  # noqa: PLC0415

    lines, _ = review.change_lines(per_file=CHANGE_PER_FILE, total=CHANGE_LINES)
    if lines:
        print("  what changed:")
    for line in lines:
        print(f"    {visible(line)}")


def _entry(entry: IndexEntry) -> dict[str, str]:
    return {
        "name": entry.name,
        "version": entry.version,
        "description": entry.description,
        "url": entry.url,
        "sha256": entry.sha256,
        "registry": entry.registry,
    }


def _asker(yes: bool) -> Ask:
    def ask(question: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            print(f"{question} Not a terminal: read the above and run again with --yes.")
            return False
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")

    return ask
