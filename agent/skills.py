"""Skills with progressive disclosure: a one-line index in the prompt, the full text on demand.

A skill is ``skills/<name>/SKILL.md`` in the workspace, starting with front matter::

    ---
    name: pdf-tools
    description: Extract text from PDFs, merge and split them.
    ---

Only names and descriptions enter the system prompt; ``get_skill`` loads one in full.
Skills are text written by the owner: file tools cannot write under ``skills/``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.tools.base import Tool, ToolContext, ToolError, ToolResult, schema

MAX_SKILL_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: Path


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(front matter fields, body). Plain ``key: value`` lines between ``---`` fences."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    fields = {}
    for line in text[3:end].splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip().lower()] = value.strip().strip("\"'")
    return fields, text[end + 4 :].lstrip("\n")


class SkillLibrary:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self._skills: tuple[Skill, ...] = ()

    def skills(self) -> tuple[Skill, ...]:
        files = sorted(self.directory.glob("*/SKILL.md")) if self.directory.is_dir() else []
        stamp = tuple((str(f), f.stat().st_mtime_ns) for f in files)
        if stamp != self._stamp:
            found = []
            for path in files:
                fields, _ = parse_front_matter(
                    path.read_text(encoding="utf-8", errors="replace")[:2_000]
                )
                name = fields.get("name") or path.parent.name
                description = (
                    fields.get("description", "").splitlines()[0]
                    if fields.get("description")
                    else ""
                )
                found.append(Skill(name, description[:200], path))
            self._stamp, self._skills = stamp, tuple(found)
        return self._skills

    def index(self) -> str:
        skills = self.skills()
        if not skills:
            return ""
        lines = [f"- {s.name}: {s.description}" for s in skills]
        return "Skills (load one with get_skill before using it):\n" + "\n".join(lines)

    def find(self, name: str) -> Skill | None:
        wanted = name.strip().lower()
        return next((s for s in self.skills() if s.name.lower() == wanted), None)


class GetSkill(Tool):
    name = "get_skill"
    description = "Load the full instructions of a skill listed in the system prompt."
    parameters = schema({"name": {"type": "string", "minLength": 1}}, ("name",))

    def __init__(self, library: SkillLibrary) -> None:
        self._library = library

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        skill = self._library.find(args["name"])
        if skill is None:
            names = ", ".join(s.name for s in self._library.skills()) or "none installed"
            raise ToolError(f"no skill named {args['name']!r}; available: {names}")
        text = await asyncio.to_thread(skill.path.read_text, encoding="utf-8", errors="replace")
        _, body = parse_front_matter(text)
        return ToolResult(body[:MAX_SKILL_CHARS])
