"""Skills: instructions the owner installs, pinned by hash and held to what they declare.

:mod:`.library` lists and loads them (by trigger or ``get_skill``), :mod:`.permissions` reads
what each declares it needs, :mod:`.lock` pins their files; installing from a folder, git,
an archive or a registry is :mod:`.install` (with :mod:`.sources`, :mod:`.registry`,
:mod:`.unpack`, :mod:`.downloads`); the assistant's drafts wait in :mod:`.proposals`; the
tools a turn gets are in :mod:`.tools`.
"""

from agent.skills.library import (
    BrokenSkill,
    FrontMatterError,
    GetSkill,
    Routed,
    Skill,
    SkillLibrary,
    parse_front_matter,
    routed_block,
    suspicious,
)

__all__ = [
    "BrokenSkill",
    "FrontMatterError",
    "GetSkill",
    "Routed",
    "Skill",
    "SkillLibrary",
    "parse_front_matter",
    "routed_block",
    "suspicious",
]
