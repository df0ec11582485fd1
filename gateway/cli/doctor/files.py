"""``switchboard doctor``: secret and memory files other users on the machine could read.

The config file, ``.env`` and the secrets directory hold tokens; the data directory holds
the store and the web sign-in key; the workspace holds the owner's memory. Each must be
the gateway user's alone (files 0600, folders 0700). The gateway and the commands that
write them create them so (:mod:`gateway.runtime.home`, ``config set``), but a file copied
in, restored from a backup or written by hand may not be: the doctor warns about each, and
``doctor --fix`` takes the group's and everyone else's permissions away.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.cli.doctor.checks import Check
from gateway.config.settings import Settings
from gateway.config.sources import secrets_dir

OTHERS = 0o077  # group and other: read, write, search


def private_paths(settings: Settings) -> Iterator[Path]:
    """Every path that must be readable by the gateway's user only (existing or not)."""
    home, workspace = settings.home, settings.workspace_dir
    yield from (settings.config_file, home / ".env", settings.data_dir)
    yield from _tree(secrets_dir(home))
    yield workspace
    yield workspace / "MEMORY.md"
    yield from _tree(workspace / "memory")


def _tree(root: Path) -> Iterator[Path]:
    yield root
    if root.is_dir() and not root.is_symlink():
        for folder, dirs, files in os.walk(root):
            for name in (*dirs, *files):
                yield Path(folder) / name


def exposed(settings: Settings) -> list[tuple[Path, int]]:
    """The private paths others may read, list or write, with their modes."""
    found = []
    for path in private_paths(settings):
        with contextlib.suppress(OSError):
            info = path.lstat()
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & OTHERS:
                found.append((path, stat.S_IMODE(info.st_mode)))
    return found


def file_checks(settings: Settings, *, fix: bool = False) -> list[Check]:
    """One warning per exposed path, or (``fix``) one line per path made private."""
    checks = []
    for path, mode in exposed(settings):
        if fix:
            try:
                path.chmod(mode & ~OTHERS)
            except OSError as exc:
                checks.append(Check("permissions", "fail", f"{path}: cannot chmod: {exc}"))
                continue
            checks.append(
                Check("permissions", "ok", f"{path}: {mode:o} -> {mode & ~OTHERS:o} (fixed)")
            )
        else:
            checks.append(
                Check(
                    "permissions",
                    "warn",
                    f"{path} is mode {mode:o}: other users on this machine can read it; "
                    "`switchboard doctor --fix` makes it yours only",
                )
            )
    if not checks:
        checks.append(Check("permissions", "ok", "secret and memory files are yours only"))
    return checks


def secrets_in_config(settings: Settings) -> list[Check]:
    """One warning per secret written in config.toml, wherever it is (a section, a named
    table such as ``[hooks.ci]``, an item of ``[[llm.fallbacks]]``): the file is shared,
    copied and backed up more readily than ``.env`` (both are yours only), and onboarding
    keeps secrets there. Which keys are secrets is what the settings' types say."""
    from gateway.config.env_file import dotted, variable, written_secrets  # noqa: PLC0415

    try:
        written = tomllib.loads(settings.config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []  # no file, or one the config check reports
    dotenv = settings.home / ".env"
    checks = []
    for path in (*written_secrets(written), *_password_urls(written)):
        value = _value_at(written, path)
        if path == ("storage", "url") and not urlsplit(str(value)).password:
            continue  # a database URL without a password is no secret
        listed = next((i for i, part in enumerate(path) if isinstance(part, int)), None)
        if listed is None:
            name = dotted(path)
            line = (
                f"{variable(name)}='{{...}}' (JSON)"
                if isinstance(value, dict)
                else (f"{variable(name)}=...")
            )
            fix = f"move it to {dotenv} as {line} and delete it from config.toml"
        else:  # an item of a list: the list is one variable
            items = dotted(path[:listed])
            fix = (
                f"move the whole list {items} to {dotenv} as {variable(items)}='[...]' (JSON) "
                "and delete it from config.toml"
            )
            if path[:listed] == ("api", "tokens"):
                fix += " (`switchboard api token add` or `remove` moves the tokens there)"
        checks.append(
            Check("secrets", "warn", f"config.toml holds the secret {dotted(path)}: {fix}")
        )
    return checks


def _password_urls(written: Any) -> Iterator[tuple[str | int, ...]]:
    """The models' base URLs written with a password in them (a proxy's basic auth:
    ``http://user:password@host/v1``): secrets like a key, though their type is a string."""
    llm = written.get("llm") if isinstance(written, dict) else None
    agents = written.get("agents") if isinstance(written, dict) else None
    tables: list[tuple[tuple[str | int, ...], Any]] = [(("llm",), llm)]
    if isinstance(llm, dict) and isinstance(llm.get("fallbacks"), list):
        tables += [(("llm", "fallbacks", n), f) for n, f in enumerate(llm["fallbacks"])]
    if isinstance(agents, dict):
        tables += [(("agents", name), table) for name, table in agents.items()]
    for path, table in tables:
        url = table.get("base_url") if isinstance(table, dict) else None
        if isinstance(url, str) and urlsplit(url).password:
            yield (*path, "base_url")


def _value_at(data: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        data = data[part]
    return data
