"""What a skill declares it needs, read from its front matter and checked before it is used.

::

    ---
    name: weather
    description: Today's forecast for a city.
    tools: [web_fetch]              # the tools a turn that loaded it may use
    network: [api.example.test]     # the hosts web_fetch and its scripts may reach (*.x: subdomains)
    paths: [notes/weather/]         # workspace paths it may read and write
    secrets: [WEATHER_API_KEY]      # what its scripts get as environment variables
    ---

These are limits, never rights: a turn that loaded the skill keeps the intersection of what
it declared and what the person's policy allows (:mod:`agent.tools.bounds`). A skill
installed with ``switchboard skills install`` (or approved from a proposal) is always held
to them, declared or not: one that declares nothing may only be read. A skill the owner
wrote by hand into ``skills/`` is held to them once it declares any.

A path may not name what the assistant must never write (the persona, ``skills/``,
``HEARTBEAT.md``, ``USER.md``: :mod:`agent.protected`), and a secret's name may not be one of
the gateway's own (``SWITCHBOARD_*``) or one that changes how programs start (``PATH``,
``LD_PRELOAD``, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agent.protected import PROTECTED
from agent.tools.bounds import Grant

FIELDS = ("tools", "network", "paths", "secrets")

_TOOL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_HOST = re.compile(
    r"^(\*\.)?[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?)*$"
)
_SECRET = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
# Variables that change how a program starts or what it trusts: never a skill's secret.
_RESERVED_SECRETS = frozenset(
    {"PATH", "HOME", "SHELL", "USER", "LANG", "TERM", "TZ", "PWD", "IFS", "ENV", "BASH_ENV"}
)
_RESERVED_PREFIXES = ("SWITCHBOARD_", "LD_", "PYTHON", "NODE_", "GIT_", "LC_", "DYLD_")


class DeclarationError(ValueError):
    """A declared permission is malformed or asks for what no skill may have."""


@dataclass(frozen=True, slots=True)
class Permissions:
    tools: tuple[str, ...] = ()
    network: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    declared: bool = False  # the front matter names at least one of the four fields

    def grant(self, skill: str, folder: Path) -> Grant:
        return Grant(
            skill=skill,
            folder=folder,
            tools=frozenset(self.tools),
            hosts=frozenset(self.network),
            paths=self.paths,
            secrets=self.secrets,
        )

    def lines(self) -> list[str]:
        """What the skill may do, one line per kind, for the owner deciding on it."""
        return [
            f"tools: {', '.join(self.tools) or 'none (it can only be read)'}",
            f"network: {', '.join(self.network) or 'none'}",
            f"paths: {', '.join(self.paths) or 'none besides its own folder (read-only)'}",
            f"secrets: {', '.join(self.secrets) or 'none'}",
        ]

    def summary(self) -> str:
        """One line: ``tools web_fetch; network api.example.test``."""
        parts = [
            f"{label} {', '.join(values)}"
            for label, values in (
                ("tools", self.tools),
                ("network", self.network),
                ("paths", self.paths),
                ("secrets", self.secrets),
            )
            if values
        ]
        return "; ".join(parts) or "read only"

    def wider_than(self, other: Permissions) -> list[str]:
        """What these permissions allow that ``other`` does not (for an update)."""
        return [
            f"{label} {item}"
            for label, mine, theirs in (
                ("tool", self.tools, other.tools),
                ("host", self.network, other.network),
                ("path", self.paths, other.paths),
                ("secret", self.secrets, other.secrets),
            )
            for item in mine
            if item not in theirs
        ]


def declared(fields: dict[str, Any]) -> Permissions:
    """The permissions in a front matter's fields; :class:`DeclarationError` names the bad one."""
    return Permissions(
        tools=tuple(_entries(fields, "tools", _tool)),
        network=tuple(_entries(fields, "network", _host)),
        paths=tuple(_entries(fields, "paths", _path)),
        secrets=tuple(_entries(fields, "secrets", _secret)),
        declared=any(name in fields for name in FIELDS),
    )


def _entries(fields: dict[str, Any], name: str, check: Any) -> list[str]:
    value = fields.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        value = [part for part in re.split(r"[,\s]+", value) if part]
    if not isinstance(value, list) or any(isinstance(v, dict | list) for v in value):
        raise DeclarationError(f"{name}: a list of names")
    found: list[str] = []
    for entry in value:
        checked = check(str(entry).strip())
        if checked not in found:
            found.append(checked)
    return found


def _tool(name: str) -> str:
    if not _TOOL.match(name):
        raise DeclarationError(f"tools: {name!r} is not a tool name")
    return name


def _host(name: str) -> str:
    host = name.lower().rstrip(".")
    if "://" in host or "/" in host or ":" in host or not _HOST.match(host):
        raise DeclarationError(
            f"network: {name!r} is not a host name (write api.example.com, or *.example.com)"
        )
    return host


def _path(name: str) -> str:
    path = PurePosixPath(name.replace("\\", "/"))
    if (
        not name
        or path.is_absolute()
        or name.startswith("~")
        or ".." in path.parts
        or str(path) == "."
    ):
        raise DeclarationError(
            f"paths: {name!r} must be a path inside the workspace, such as notes/ or data.csv"
        )
    parts = [p.casefold() for p in path.parts]
    for rule in PROTECTED:
        wanted = [p.casefold() for p in PurePosixPath(rule.path).parts]
        if parts[: len(wanted)] == wanted:
            raise DeclarationError(f"paths: {name!r} is {rule.path}, which no skill may have")
    return str(path) + ("/" if name.endswith("/") else "")


def _secret(name: str) -> str:
    if not _SECRET.match(name):
        raise DeclarationError(
            f"secrets: {name!r} is not an environment variable name (A-Z, 0-9 and _)"
        )
    if name in _RESERVED_SECRETS or name.startswith(_RESERVED_PREFIXES):
        raise DeclarationError(f"secrets: {name!r} is reserved and cannot be a skill's secret")
    return name
