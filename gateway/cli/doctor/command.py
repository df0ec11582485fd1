"""``switchboard doctor``: what is wrong, and what to do about it.

Each check is one line (``[ok  ]``, ``[WARN]``, ``[FAIL]``) with what to do; a configuration
error is one failed check and the rest still run on the settings that are valid.
``--json`` prints ``{"ok": bool, "problems": n, "warnings": n, "checks": [{"name",
"status", "message"}]}`` (status ``ok`` | ``warn`` | ``fail``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from dataclasses import asdict
from typing import TYPE_CHECKING

from gateway.cli.doctor.checks import Check, Status
from gateway.cli.doctor.connect import connect_checks
from gateway.cli.doctor.files import file_checks, secrets_in_config
from gateway.cli.doctor.integrations import calendar_check, voice_check
from gateway.cli.doctor.memory import memory_checks
from gateway.cli.doctor.models import (
    llm_key_check,
    llm_reachability,
    other_model_checks,
    pictures_check,
)
from gateway.cli.doctor.probes import PROBE_TIMEOUT, channel_checks, probe_channel
from gateway.cli.doctor.store import store_checks
from gateway.cli.doctor.tools import (
    browser_check,
    mcp_checks,
    root_checks,
    sandbox_checks,
    scan_check,
    skill_checks,
)
from gateway.core.errors import ConfigError, ConfigFileUnreadable

if TYPE_CHECKING:
    from gateway.config.settings import Settings

__all__ = [  # the channel checks moved to gateway.cli.doctor.probes; importable from here as before
    "PROBE_TIMEOUT",
    "Check",
    "Status",
    "channel_checks",
    "llm_key_check",
    "llm_reachability",
    "probe_channel",
    "run_doctor",
]

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


DESCRIPTION = (
    "Check the installed packages against what the code needs, the configuration, every model (one test request each: the primary, its "
    "fallbacks, other agents' models), the workspace, the exec sandbox, "
    "risky settings, every channel's login, webhooks and the API, the calendar's login, "
    "the speech server ([voice]: a moment of silence transcribed, a word spoken), "
    "each with what to do. "
    "Exit code 1 when a check fails."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "doctor",
        parents=[common],
        help="check everything, say what to fix",
        description=DESCRIPTION,
    )
    command.add_argument("--json", action="store_true", help="print the checks as JSON")
    command.add_argument(
        "--fix",
        action="store_true",
        help="make secret and memory files readable by you only (chmod go-rwx)",
    )
    # a renamed key is reported, not moved: doctor changes nothing (but with --fix, modes)
    command.set_defaults(handler=doctor_command, needs_settings="partial", changes_nothing=True)


def doctor_command(args: argparse.Namespace, settings: Settings) -> int:
    problem: ConfigError | None = getattr(args, "config_problem", None)
    return asyncio.run(
        run_doctor(settings, config_problem=problem, as_json=args.json, fix=args.fix)
    )


def bootstrap_names() -> list[str]:
    """The files a new workspace starts with (what `onboard` creates)."""
    from gateway.runtime.home import template_dir  # noqa: PLC0415

    return sorted(p.name for p in template_dir().glob("*.md"))


def workspace_checks(settings: Settings) -> list[Check]:
    checks = []
    home, workspace = settings.home, settings.workspace_dir
    if not settings.config_file.exists():
        checks.append(
            Check(
                "config",
                "warn",
                f"{settings.config_file} does not exist; run `switchboard onboard`",
            )
        )
    else:
        checks.append(Check("config", "ok", f"{settings.config_file} is valid"))
    if not workspace.is_dir():
        checks.append(
            Check("workspace", "fail", f"{workspace} does not exist; run `switchboard onboard`")
        )
    elif not os.access(workspace, os.W_OK):
        checks.append(Check("workspace", "fail", f"{workspace} is not writable by this user"))
    else:
        names = bootstrap_names()
        missing = [n for n in names if not (workspace / n).exists()]
        found = f"{len(names) - len(missing)}/{len(names)} bootstrap files"
        if missing:
            found += f"; missing {', '.join(missing)} (`switchboard onboard` restores them)"
        checks.append(Check("workspace", "ok", f"{workspace} ({found})"))
    if settings.data_dir.exists() and not os.access(settings.data_dir, os.W_OK):
        checks.append(Check("data", "fail", f"{settings.data_dir} is not writable"))
    if workspace == home or settings.data_dir.is_relative_to(workspace):
        checks.append(
            Check(
                "workspace",
                "warn",
                "the workspace contains Switchboard's own data; tools are still refused access to it, but keep them apart",
            )
        )
    return checks


def security_checks(settings: Settings) -> list[Check]:
    """Risky settings, each with the threat it opens (docs/security.md)."""
    from channels import enabled_channels  # noqa: PLC0415

    checks = []
    for name in enabled_channels(settings):
        section = settings.channel_sections()[name]
        if section.dm_policy == "open":
            checks.append(
                Check(
                    f"{name} access",
                    "warn",
                    "dm_policy is 'open': anyone who finds the bot can use it (and your model budget)",
                )
            )
        if "*" in section.allow_from:
            checks.append(
                Check(f"{name} access", "warn", "allow_from contains '*': every sender is allowed")
            )
        if section.group_policy == "open":
            checks.append(
                Check(
                    f"{name} access",
                    "warn",
                    "group_policy is 'open': the bot answers in any group it is added to",
                )
            )
    policy = settings.tools.policy
    if "exec" not in policy.group_deny and settings.tools.exec.enabled:
        checks.append(
            Check(
                "tool policy",
                "warn",
                "exec is allowed in group chats: any group member can run commands on this machine",
            )
        )
    if "exec" not in policy.member_deny and settings.tools.exec.enabled:
        checks.append(
            Check(
                "tool policy",
                "warn",
                "exec is allowed for members: every paired or allowlisted user can run commands",
            )
        )
    if not policy.taint_guard:
        checks.append(
            Check(
                "tool policy",
                "warn",
                "taint_guard is off: web pages and emails can trigger side effects",
            )
        )
    if settings.web.host not in ("127.0.0.1", "localhost", "::1") and settings.web.token is None:
        checks.append(
            Check(
                "web",
                "fail",
                f"web.host is {settings.web.host} without web.token: the gateway refuses to start",
            )
        )
    if not checks:
        checks.append(Check("security", "ok", "no risky settings found"))
    return checks


async def run_doctor(
    settings: Settings,
    *,
    config_problem: ConfigError | None = None,
    as_json: bool = False,
    fix: bool = False,
) -> int:
    checks = [
        *config_checks(settings, config_problem),  # replaces the "config is valid" line
        install_check(),
        *(c for c in workspace_checks(settings) if c.name != "config" or not config_problem),
        *file_checks(settings, fix=fix),
        *secrets_in_config(settings),
        *store_checks(settings),
        *skill_checks(settings),
        *security_checks(settings),
        *sandbox_checks(settings),
        scan_check(settings),
        *root_checks(),
        llm_key_check(settings),
    ]
    # Every model, every channel, MCP servers and the browser are asked at once: a slow one
    # costs its own timeout only.
    primary = [llm_reachability(settings)] if checks[-1].status != "fail" else []
    (
        llm,
        pictures,
        others,
        channels,
        mcp,
        browser,
        connect,
        memory,
        calendar,
        voice,
    ) = await asyncio.gather(
        asyncio.gather(*primary),
        pictures_check(settings),
        other_model_checks(settings),
        channel_checks(settings),
        mcp_checks(settings),
        browser_check(settings),
        connect_checks(settings),
        memory_checks(settings),
        calendar_check(settings),
        voice_check(settings),
    )
    if config_problem is not None:
        llm = [_despite_invalid(check, settings, config_problem) for check in llm]
    checks += [*llm, *pictures, *others, *channels, *mcp, *browser, *connect, *memory, *calendar]
    checks += voice
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    if as_json:
        report = {
            "ok": not failed,
            "problems": failed,
            "warnings": warned,
            "checks": [asdict(c) for c in checks],
        }
        print(json.dumps(report, indent=2))
        return 1 if failed else 0
    width = max(len(c.name) for c in checks)
    for check in checks:
        print(f"[{_MARK[check.status]}] {check.name:<{width}}  {check.message}")
    print(f"\n{summary(failed, warned)}")
    return 1 if failed else 0


def _despite_invalid(check: Check, settings: Settings, problem: ConfigError) -> Check:
    """The primary model's check when a key of ``[llm]`` is invalid: it asked the model the
    valid settings name, with the default in that key's place, which is not the model
    configured (an [ok] for a model nobody set would mislead)."""
    from gateway.cli.home import problem_keys  # noqa: PLC0415

    found = problem_keys(problem, settings.home)
    invalid = ["config.toml"] if found is None else [k for k, _ in found if k.startswith("llm.")]
    if not invalid:
        return check
    return Check(
        check.name,
        "warn" if check.status == "ok" else check.status,
        f"{check.message}; but {', '.join(invalid)} is not valid, so this asked what the "
        "rest of [llm] names, with defaults in its place: maybe not the model you meant",
    )


def install_check() -> Check:
    """The packages this code needs, each installed at a version it takes: code updated
    (``git pull``) and not installed again lacks them."""
    from gateway.core.system.install import install_problem  # noqa: PLC0415

    problem = install_problem()
    if problem is None:
        return Check("install", "ok", "every package this code needs is installed")
    return Check("install", "fail", problem)


def config_checks(settings: Settings, problem: ConfigError | None) -> list[Check]:
    """The configuration error as one failed check (the other checks use what is valid);
    keys of config.toml that only moved, which the next start moves, as warnings."""
    from gateway.config.toml.moves import pending  # noqa: PLC0415

    if problem is None:
        return []
    text = str(problem).removeprefix("Invalid configuration:").strip()
    lines = [line.strip() for line in text.splitlines()]
    if isinstance(problem, ConfigFileUnreadable):  # nothing else can be read in the file
        return [Check("config", "fail", f"{problem} (other checks use the defaults)")]
    moved = [found.said() for found in pending(settings.home) if found.movable]
    if moved and sorted(lines) == sorted(moved):
        return [Check("config", "warn", said) for said in moved]
    message = "; ".join(lines)
    return [Check("config", "fail", f"{message} (other checks use the valid settings)")]


def summary(failed: int, warned: int) -> str:
    warnings = f"{warned} warning{'s' * (warned != 1)}"
    if failed:
        return f"{failed} problem{'s' * (failed != 1)} found" + (
            f", {warnings}." if warned else "."
        )
    if warned:
        return f"No problems, {warnings} (see [WARN] above)."
    return "All checks passed."
