"""What a ``switchboard doctor`` check reports, and the check of the installed skills."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gateway.config.settings import Settings

Status = Literal["ok", "warn", "fail"]
MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    message: str


def skill_checks(settings: Settings) -> list[Check]:
    """Skills whose SKILL.md front matter cannot be read are left out of every prompt: say which."""
    from agent.skills import SkillLibrary  # noqa: PLC0415
    from gateway.runtime.assembly import workspaces  # noqa: PLC0415

    checks, loaded = [], 0
    for workspace in dict.fromkeys(workspaces(settings).values()):
        library = SkillLibrary(workspace / "skills")
        loaded += len(library.skills())
        for problem in library.problems():
            where = problem.path.relative_to(workspace)
            checks.append(
                Check("skills", "warn", f"{where}: {problem.reason}; the skill is skipped")
            )
    if loaded or checks:
        checks.append(Check("skills", "ok", f"{loaded} skill{'' if loaded == 1 else 's'} loaded"))
    return checks
