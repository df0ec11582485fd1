"""``switchboard service install|uninstall|status``: run the gateway in the background,
started at login (or boot, with lingering) and restarted when it fails.

Linux: a systemd user unit, ``~/.config/systemd/user/switchboard.service``. macOS: a launchd
agent, ``~/Library/LaunchAgents/dev.switchboard.gateway.plist``. Both run this Python with
``-m gateway run`` and ``SWITCHBOARD_HOME`` set, so they keep working whatever PATH is; the
configuration comes from the home (config.toml, ``.env``, secrets), not from the shell that
installed the service.
"""

from __future__ import annotations

import argparse
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.cli.exit_codes import A_PERSON_MUST_ACT
from gateway.cli.service.launchd import LABEL as LAUNCHD_LABEL
from gateway.cli.service.launchd import STOPPED_FILE

if TYPE_CHECKING:
    from gateway.config.settings import Settings


UNIT_NAME = "switchboard.service"
RESTART_SECONDS = 5
STOP_TIMEOUT_SECONDS = 30  # the gateway lets running turns finish for up to 10 s
DESCRIPTION = (
    "Install the gateway as a background service that starts at login and restarts when it "
    "fails: a systemd user unit on Linux, a launchd agent on macOS. `uninstall` stops and "
    "removes it, `status` asks the service manager."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "service", parents=[common], help="run as a background service", description=DESCRIPTION
    )
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    install = actions.add_parser(
        "install",
        parents=[common],
        help="write the unit/agent and start it",
        description="Write the systemd user unit (Linux) or launchd agent (macOS), enable and "
        "start it. An existing one is replaced.",
    )
    install.add_argument(
        "--no-start", action="store_true", help="only write the file; enable and start nothing"
    )
    actions.add_parser(
        "uninstall",
        parents=[common],
        help="stop and remove it",
        description="Stop the service and remove its file.",
    )
    actions.add_parser(
        "status",
        parents=[common],
        help="what the service manager says",
        description="Show the service manager's view (systemctl / launchctl).",
    )
    command.set_defaults(handler=service_command)


def service_command(args: argparse.Namespace, settings: Settings) -> int:
    macos = sys.platform == "darwin"
    path = launchd_path() if macos else systemd_path()
    if args.action == "install":
        if not macos and not args.no_start and (problem := _no_user_manager()) is not None:
            print(problem, file=sys.stderr)
            return 1
        text = launchd_plist(settings) if macos else systemd_unit(settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        if macos:  # launchd changes into the home and opens the logs before the gateway runs
            settings.home.mkdir(parents=True, exist_ok=True)
            (settings.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote    {path}")
        _warn_about_environment()
        if args.no_start:
            print(
                f"Start it with: {' && '.join(' '.join(c) for c in _start_commands(path, macos))}"
            )
            return 0
        code = _run_all(_start_commands(path, macos), after=_started_hint(macos))
        if code != 0:  # nothing half-installed: the next try starts clean
            path.unlink(missing_ok=True)
            print(f"removed  {path} (not started)", file=sys.stderr)
        return code
    if args.action == "uninstall":
        if not path.exists():
            print(f"No service installed ({path} does not exist).")
            return 0
        _run_all(_stop_commands(path, macos), check=False)
        path.unlink()
        print(f"removed  {path}")
        if not macos and shutil.which("systemctl"):
            _run_all([["systemctl", "--user", "daemon-reload"]], check=False)
        return 0
    if not path.exists():  # 1 as every "no such thing"; 3 is `run`'s "another one runs"
        print(
            f"switchboard: no service installed (`switchboard service install` writes {path}).",
            file=sys.stderr,
        )
        return 1
    command = (
        ["launchctl", "print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"]
        if macos
        else ["systemctl", "--user", "status", "--no-pager", UNIT_NAME]
    )
    return _run_all([command], check=False)


# -- the files --------------------------------------------------------------------------


def systemd_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user" / UNIT_NAME


def launchd_path() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def systemd_unit(settings: Settings, python: str = sys.executable) -> str:
    """The user unit: restart on failure, but not on an exit a person must act on first (a
    configuration or store it refuses, a package missing, a port taken:
    gateway/cli/exit_codes.py), SIGTERM
    with time to finish, output to the journal (the gateway also writes
    data/logs/switchboard.log)."""
    return f"""\
[Unit]
Description=Switchboard AI assistant gateway ({settings.home})

[Service]
Type=simple
ExecStart={_quoted(python)} -m gateway run
Environment={_quoted(f"SWITCHBOARD_HOME={settings.home}")}
Environment=PYTHONUNBUFFERED=1
WorkingDirectory={str(settings.home).replace("%", "%%")}
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec={RESTART_SECONDS}
RestartPreventExitStatus={" ".join(map(str, A_PERSON_MUST_ACT))}
KillSignal=SIGTERM
TimeoutStopSec={STOP_TIMEOUT_SECONDS}

[Install]
WantedBy=default.target
"""


def launchd_plist(settings: Settings, python: str = sys.executable) -> str:
    """The launchd agent: started at login, restarted when it crashes, as the systemd unit
    is: not when it was stopped or exited with a status a person must act on first.

    launchd's ``KeepAlive`` tells exit statuses apart only as zero or not
    (``SuccessfulExit``) and has no list of statuses not to restart on; ``Crashed`` counts
    only a few signals, not an exception's exit 1. So the agent keeps the gateway running
    while a file is absent (``PathState``), which ``switchboard run`` writes when it exits
    in a way a restart does not change and removes when it starts (gateway/cli/service/launchd.py):
    the exit status stays what it is (``launchctl print`` shows it)."""
    logs = settings.data_dir / "logs"
    environment = {
        "SWITCHBOARD_HOME": str(settings.home),
        "PYTHONUNBUFFERED": "1",
        STOPPED_FILE: str(launchd_stopped_file(settings)),
    }
    agent = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": [python, "-m", "gateway", "run"],
        "EnvironmentVariables": environment,
        "WorkingDirectory": str(settings.home),
        "RunAtLoad": True,
        "KeepAlive": {"PathState": {str(launchd_stopped_file(settings)): False}},
        "ThrottleInterval": RESTART_SECONDS,
        "ExitTimeOut": STOP_TIMEOUT_SECONDS,
        "StandardOutPath": str(logs / "service.out.log"),
        "StandardErrorPath": str(logs / "service.err.log"),
    }
    return plistlib.dumps(agent).decode("utf-8")


def launchd_stopped_file(settings: Settings) -> Path:
    """While this file exists, launchd does not start the gateway again (see above)."""
    return settings.data_dir / "launchd-stopped"


def _quoted(value: str) -> str:
    """A systemd word: quoted, with backslashes, quotes and % escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


# -- the service manager ----------------------------------------------------------------


def _start_commands(path: Path, macos: bool) -> list[list[str]]:
    if macos:
        target = f"gui/{os.getuid()}"
        return [["launchctl", "bootstrap", target, str(path)]]
    return [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", UNIT_NAME],
    ]


def _stop_commands(path: Path, macos: bool) -> list[list[str]]:
    if macos:
        return [["launchctl", "bootout", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"]]
    return [["systemctl", "--user", "disable", "--now", UNIT_NAME]]


def _started_hint(macos: bool) -> str:
    if macos:
        return "Started. `switchboard status` and `switchboard logs -f` show what it does."
    return (
        "Started. `switchboard status` and `switchboard logs -f` show what it does. To keep it "
        f"running while you are logged out: loginctl enable-linger {os.environ.get('USER', '$USER')}"
    )


def _no_user_manager() -> str | None:
    """Why a systemd user service cannot be started from here, or None when it can: no
    ``systemctl``, or no user manager to talk to (a container, SSH without a login session
    or lingering: "Failed to connect to bus")."""
    user = os.environ.get("USER", "$USER")
    others = (
        "Other ways: `switchboard service install --no-start` writes the unit for later; "
        "in a container, make `switchboard run` the container's command (README, In Docker); "
        "anywhere, run `switchboard run` under the supervisor you use."
    )
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return f"switchboard: systemd is not available here (no systemctl). {others}"
    try:
        probe = subprocess.run(
            [systemctl, "--user", "show-environment"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"switchboard: `systemctl --user` did not answer within 15 s. {others}"
    if probe.returncode == 0:
        return None
    said = (probe.stderr or probe.stdout).strip().splitlines()
    return (
        "switchboard: there is no systemd user session to install the service into "
        f"(`systemctl --user` says: {said[0] if said else f'exit {probe.returncode}'}). "
        "That is usual in containers and over SSH without a login session. Log in on the "
        f"machine (or enable lingering: `sudo loginctl enable-linger {user}`, then log in "
        f"again) and run `switchboard service install` there. {others}"
    )


def _run_all(commands: list[list[str]], *, check: bool = True, after: str = "") -> int:
    for command in commands:
        if shutil.which(command[0]) is None:
            print(
                f"switchboard: {command[0]} is not available here; run it where it is: "
                f"{' '.join(command)}",
                file=sys.stderr,
            )
            return 1
        result = subprocess.run(command, check=False)
        if result.returncode != 0 and check:
            print(
                f"switchboard: `{' '.join(command)}` failed (exit {result.returncode})",
                file=sys.stderr,
            )
            return 1
        if result.returncode != 0:
            return result.returncode
    if after:
        print(after)
    return 0


def _warn_about_environment() -> None:
    names = sorted(
        n for n in os.environ if n.startswith("SWITCHBOARD_") and n != "SWITCHBOARD_HOME"
    )
    names += [n for n in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY") if n in os.environ]
    if names:
        print(
            f"note: the service does not see this shell's {', '.join(names)}; put them in "
            "$SWITCHBOARD_HOME/.env (or config.toml) so it does"
        )
