"""How this copy of Switchboard was installed, so a hint to add an optional part
(``[browser]``, ``[matrix]``) gives the command that works here, not a generic one.

Four ways, told apart by what the installers leave behind: an editable install from a clone
(``make``, ``pip install -e .``; the package's ``direct_url.json`` says editable and where),
``pipx install`` (``pipx_metadata.json`` in its virtualenv), ``uv tool install``
(``uv-receipt.toml`` in its virtualenv), and any other pip install (from a directory, whose
path ``direct_url.json`` names, or from an index).
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

DISTRIBUTION = "switchboard"

Kind = Literal["editable", "pipx", "uv", "pip"]


@dataclass(frozen=True, slots=True)
class Installation:
    kind: Kind
    prefix: Path  # the virtualenv (or Python) Switchboard is installed in
    source: Path | None = None  # the clone or directory it was installed from, if known

    def command(self, extra: str, *, cwd: Path | None = None) -> str:
        """The shell command that adds ``extra`` to this installation (run from ``cwd``)."""
        if self.kind == "editable" and self.source is not None:
            pip = self.prefix / "bin" / "pip"
            if pip.is_relative_to(self.source):
                pip = pip.relative_to(self.source)
            here = (cwd or Path.cwd()).resolve() == self.source.resolve()
            go = "" if here else f"cd {shlex.quote(str(self.source))} && "
            return f"{go}{shlex.quote(str(pip))} install -e {shlex.quote(f'.[{extra}]')}"
        requirement = shlex.quote(f"{self.source or DISTRIBUTION}[{extra}]")
        if self.kind == "pipx":
            return f"pipx install --force {requirement}"
        if self.kind == "uv":
            return f"uv tool install --force {requirement}"
        return f"{shlex.quote(str(self.prefix / 'bin' / 'python'))} -m pip install {requirement}"


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
