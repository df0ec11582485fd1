"""A home and its workspaces, created from the templates without ever overwriting a user's file.

``switchboard onboard`` creates the home; the gateway gives a new agent its workspace.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gateway.config.toml.config_file import config_template

WORKSPACE_SUBDIRS = ("memory", "skills")


@dataclass(slots=True)
class OnboardReport:
    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def template_dir() -> Path:
    """``workspace-template/`` from a source checkout, or from an installed wheel's data."""
    checkout = Path(__file__).resolve().parents[2] / "workspace-template"
    if checkout.is_dir():
        return checkout
    installed = Path(sys.prefix) / "share" / "switchboard" / "workspace-template"
    if installed.is_dir():
        return installed
    raise FileNotFoundError("workspace-template not found; reinstall Switchboard")


def prepare_workspace(workspace: Path, report: OnboardReport | None = None) -> OnboardReport:
    """Create a workspace from the template; files already there are kept as they are."""
    report = report or OnboardReport()
    for directory in (workspace, *(workspace / d for d in WORKSPACE_SUBDIRS)):
        if not directory.exists():
            directory.mkdir(parents=True, mode=0o700)  # the owner's memory: theirs only
            report.created.append(directory)
    for source in sorted(template_dir().rglob("*")):
        if source.is_file():
            _copy_new(source, workspace / source.relative_to(template_dir()), report)
    return report


def onboard(home: Path, workspace: Path, *, config: bool = True) -> OnboardReport:
    """The home, its data folder and the workspace; config.toml from the template too unless
    ``config`` is False (``switchboard onboard`` writes it once its answers are saved, so an
    interrupted onboarding leaves none and ``make chat`` asks again)."""
    report = OnboardReport()
    for directory in (home, home / "data"):
        if not directory.exists():
            directory.mkdir(parents=True)
            report.created.append(directory)
    (home / "data").chmod(0o700)
    if config:
        path = home / "config.toml"
        _write_new(path, config_template(), report)
        path.chmod(0o600)
    return prepare_workspace(workspace, report)


def _write_new(target: Path, text: str, report: OnboardReport) -> None:
    if target.exists():
        report.kept.append(target)
        return
    target.write_text(text, encoding="utf-8")
    report.created.append(target)


def _copy_new(source: Path, target: Path, report: OnboardReport) -> None:
    if target.exists():
        report.kept.append(target)
        return
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copyfile(source, target)
    target.chmod(0o600)  # memory and profile files are the owner's alone
    report.created.append(target)
