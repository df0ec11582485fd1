"""How this copy of Switchboard was installed, so a hint to add an optional part
(``[browser]``, ``[matrix]``) or to reinstall gives the command that works here, not a
generic one; and whether what the code needs is installed (code updated with ``git pull``
and not reinstalled lacks a package it imports, or has one too old).

Four ways, told apart by what the installers leave behind: an editable install from a clone
(``make``, ``pip install -e .``; the package's ``direct_url.json`` says editable and where),
``pipx install`` (``pipx_metadata.json`` in its virtualenv), ``uv tool install``
(``uv-receipt.toml`` in its virtualenv), and any other pip install (from a directory, whose
path ``direct_url.json`` names, or from an index).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

DISTRIBUTION = "switchboard"
OURS = ("gateway", "agent", "channels")  # the top-level packages of this code
# where the code runs from a checkout: what it needs, changed by a pull before any reinstall
CHECKOUT_PROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"

Kind = Literal["editable", "pipx", "uv", "pip"]


@dataclass(frozen=True, slots=True)
class Installation:
    kind: Kind
    prefix: Path  # the virtualenv (or Python) Switchboard is installed in
    source: Path | None = None  # the clone or directory it was installed from, if known

    def command(self, extra: str = "", *, cwd: Path | None = None) -> str:
        """The shell command that adds ``extra`` to this installation (run from ``cwd``);
        without one, that installs it again with what its code needs now."""
        wanted = f"[{extra}]" if extra else ""
        if self.kind == "editable" and self.source is not None:
            pip = self.prefix / "bin" / "pip"
            if pip.is_relative_to(self.source):
                pip = pip.relative_to(self.source)
            go = self._go(cwd)
            return f"{go}{shlex.quote(str(pip))} install -e {shlex.quote(f'.{wanted}')}"
        requirement = shlex.quote(f"{self.source or DISTRIBUTION}{wanted}")
        if self.kind == "pipx":
            return f"pipx install --force {requirement}"
        if self.kind == "uv":
            return f"uv tool install --force {requirement}"
        return f"{shlex.quote(str(self.prefix / 'bin' / 'python'))} -m pip install {requirement}"

    def reinstall(self, *, cwd: Path | None = None) -> str:
        """What installs this copy again with the packages its code needs now, said to a
        person: ``make install`` in a clone installed by make (into its ``.venv``), else
        :meth:`command`."""
        source = self.source
        if (
            self.kind == "editable"
            and source is not None
            and self.prefix == source / ".venv"
            and (source / "Makefile").is_file()
        ):
            pip = f"`{self.command(cwd=source)}`"
            if self._go(cwd):
                return f"`make install` in {source} (or {pip} there)"
            return f"`make install` (or {pip})"
        return f"`{self.command(cwd=cwd)}`"

    def _go(self, cwd: Path | None) -> str:
        """``cd`` into the clone first, unless ``cwd`` is it."""
        assert self.source is not None
        here = (cwd or Path.cwd()).resolve() == self.source.resolve()
        return "" if here else f"cd {shlex.quote(str(self.source))} && "


def installation(prefix: Path | None = None) -> Installation:
    """How the running Switchboard was installed (``prefix``: its environment's)."""
    prefix = Path(sys.prefix) if prefix is None else prefix
    editable, source = _direct_url()
    if (prefix / "pipx_metadata.json").is_file():
        return Installation("pipx", prefix, source)
    if (prefix / "uv-receipt.toml").is_file():
        return Installation("uv", prefix, source)
    return Installation("editable" if editable else "pip", prefix, source)


def install_command(extra: str) -> str:
    """The command that installs ``switchboard[extra]`` the way this copy was installed."""
    return installation().command(extra)


def _direct_url() -> tuple[bool, Path | None]:
    """Whether the package is installed editable, and the local directory it came from.
    (Run from a clone's root, Python also finds the clone's ``*.egg-info``, which has no
    ``direct_url.json``: the installed copy's metadata is the one that tells.)"""
    texts = (d.read_text("direct_url.json") for d in metadata.distributions(name=DISTRIBUTION))
    text = next((t for t in texts if t), None)
    if text is None:  # installed from an index, or a source tree never installed
        return False, None
    found = json.loads(text)
    url = urlsplit(str(found.get("url", "")))
    source = Path(unquote(url.path)) if url.scheme == "file" and "dir_info" in found else None
    if source is not None and not source.is_dir():  # built elsewhere (a Docker build stage)
        source = None
    return bool(found.get("dir_info", {}).get("editable")), source


def requirements() -> list[str]:
    """What this code needs installed, as requirement lines (``pydantic>=2.10``): its
    checkout's pyproject.toml where it runs from one, else what the installed distribution
    declares; optional parts (extras) left out."""
    if CHECKOUT_PROJECT.is_file():
        project = tomllib.loads(CHECKOUT_PROJECT.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == DISTRIBUTION:
            return [str(line) for line in project.get("dependencies", [])]
    try:
        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    return [line for line in declared if "extra ==" not in line]


def unmet_requirements() -> list[str]:
    """Each requirement of :func:`requirements` that is not installed, or installed at a
    version outside its range, said as such (``recurring-ical-events is not installed``)."""
    from packaging.requirements import Requirement  # noqa: PLC0415 - doctor only

    unmet = []
    for line in requirements():
        wanted = Requirement(line)
        if wanted.marker is not None and not wanted.marker.evaluate({"extra": ""}):
            continue  # not on this platform
        try:
            found = metadata.version(wanted.name)
        except metadata.PackageNotFoundError:
            unmet.append(f"{wanted.name} is not installed")
            continue
        if not wanted.specifier.contains(found, prereleases=True):
            unmet.append(
                f"{wanted.name} {found} is installed and this code needs {wanted.specifier}"
            )
    return unmet


def install_problem() -> str | None:
    """What :func:`unmet_requirements` finds, with the command that installs what this code
    needs; None when everything is installed."""
    unmet = unmet_requirements()
    return f"{'; '.join(unmet)}: run {installation().reinstall()}" if unmet else None


def missing_package(exc: ImportError) -> str | None:
    """What to say instead of a traceback when this code imports a package the environment
    lacks, or has in a version too old to offer a name: which one, and the command that
    installs what the code needs. None when the module is ours (a bug, or a damaged
    checkout). Without :mod:`packaging`, which may be the package missing."""
    module = (exc.name or "").split(".")[0]
    if not module or module in OURS:
        return None
    owners = metadata.packages_distributions().get(module, [])
    known = {_canonical(module), *map(_canonical, owners)}
    named = (_name(line) for line in requirements())
    package = next((n for n in named if _canonical(n) in known), owners[0] if owners else module)
    if isinstance(exc, ModuleNotFoundError):
        problem = f"the Python package {package}, which is not installed"
    else:
        problem = f"a newer {package} than the one installed ({exc})"
    return (
        f"this Switchboard needs {problem} in {sys.prefix}: its code was updated without "
        f"installing what it needs. Run {installation().reinstall()}, then `switchboard "
        "upgrade --check`."
    )


def _name(requirement: str) -> str:
    """The distribution a requirement line names (``discord.py>=2.7`` names discord.py)."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return found[1] if found else requirement


def _canonical(name: str) -> str:
    """A distribution's name as indexes compare it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()
