"""Settings that moved: a renamed key is moved in config.toml, a removed one refused, and
``SWITCHBOARD_*`` variables that name no setting are reported. Never silently ignored.

A release renames or removes a setting now and then (:data:`MOVES`). At start, and when
any command but ``doctor`` and ``upgrade`` reads the configuration
(:func:`gateway.config.settings.load_settings`), a renamed key in config.toml is moved to
its new name in place, the file's comments and order kept (tomlkit), with a line in the log;
set in the environment, ``.env`` or a secret file it stops the start naming the variable
to set instead (Switchboard does not edit those). A removed key stops the start saying
what replaces it. ``switchboard upgrade --check`` lists all of it without changing
anything (:func:`pending`).
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.config.explain import ENV_PREFIX, env_name
from gateway.config.sources import read_config, read_dotenv, read_toml, secrets_dir
from gateway.core.errors import ConfigError

if TYPE_CHECKING:
    from tomlkit.toml_document import TOMLDocument

log = logging.getLogger(__name__)

# SWITCHBOARD_* variables that are not settings: where the settings are
# SWITCHBOARD_STOPPED_FILE: the launchd agent's (gateway/cli/service/launchd.py)
NOT_SETTINGS = frozenset(
    {f"{ENV_PREFIX}HOME", f"{ENV_PREFIX}SECRETS_DIR", f"{ENV_PREFIX}STOPPED_FILE"}
)


@dataclass(frozen=True, slots=True)
class Move:
    """A setting that left its name: renamed to ``new``, or removed (``new`` is None, and
    ``instead`` says what to do)."""

    old: str
    new: str | None = None
    instead: str = ""

    def told(self) -> str:
        if self.new is None:
            return f"{self.old} was removed: {self.instead}"
        return f"{self.old} was renamed to {self.new}"


MOVES: tuple[Move, ...] = (
    # the zone of the prompt clock, quiet hours and jobs: a person's, not the heartbeat's
    Move("heartbeat.timezone", "user.timezone"),
)


@dataclass(frozen=True, slots=True)
class Found:
    """A moved setting still given: where, and what becomes of it."""

    move: Move
    where: str  # "config.toml" or the variable's source
    movable: bool  # moved in config.toml at start; otherwise the start is refused

    def said(self) -> str:
        if self.movable:
            return f"{self.where}: {self.move.told()}; it is moved there at the next start"
        if self.move.new is None:
            return f"{self.where}: {self.move.told()}"
        return f"{self.where}: {self.move.told()}: set {env_name(tuple(self.move.new.split('.')))} instead"


def pending(home: Path, environ: Mapping[str, str] | None = None) -> list[Found]:
    """Every moved setting the home's sources still give (nothing is changed)."""
    env = os.environ if environ is None else environ
    config = home / "config.toml"
    document = read_toml(config) if config.exists() else None
    found = []
    for move in MOVES:
        if document is not None and _get(document, move.old) is not None:
            found.append(Found(move, str(config), movable=move.new is not None))
        variable = env_name(tuple(move.old.split(".")))
        found.extend(
            Found(move, where, movable=False) for where in _variable_sources(home, env, variable)
        )
    return found


def move_keys(home: Path, environ: Mapping[str, str] | None = None) -> None:
    """Move the renamed keys of the home's config.toml to their new names (a line in the
    log each); raise :class:`ConfigError` for a removed key, for a renamed one set where
    Switchboard does not write (the environment, ``.env``, a secret file), and for a
    renamed key whose new name is set to another value."""
    found = pending(home, environ)
    refused = [f for f in found if not f.movable]
    if refused:
        first = refused[0].move
        raise ConfigError(
            "Invalid configuration:\n" + "\n".join(f"  {f.said()}" for f in refused),
            field=first.new or first.old,
        )
    if not found:
        return
    config = home / "config.toml"
    _rewrite(config, found)


def _rewrite(config: Path, found: list[Found]) -> None:
    """Move the keys of ``found`` in ``config``, keeping everything else as it was."""
    import tomlkit  # noqa: PLC0415 - only when a key moved (its import costs a start 0.1 s)

    document = tomlkit.parse(read_config(config))
    for each in found:
        move = each.move
        assert move.new is not None
        value = _get(document, move.old)
        present = _get(document, move.new)
        if present is not None and present != value:
            raise ConfigError(
                f"{config}: {move.told()}, and both are set, to different values "
                f"({value!r}, {present!r}): keep only {move.new}",
                field=move.new,
            )
        comments = _delete(document, move.old)
        if present is None:
            _set(document, move.new, value, comments)
        log.warning("%s: %s; moved (the file's other lines are as they were)", config, move.told())
    text = tomlkit.dumps(document).rstrip("\n") + "\n"
    moved = tomlkit.parse(text)
    assert all(_get(moved, f.move.old) is None for f in found)
    config.write_text(text, encoding="utf-8")


def refuse_moved(home: Path, environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` for every moved setting still given, changing nothing."""
    found = pending(home, environ)
    if found:
        raise ConfigError(
            "Invalid configuration:\n" + "\n".join(f"  {f.said()}" for f in found),
            field=found[0].move.new or found[0].move.old,
        )


def unknown_variables(
    home: Path, settings: Iterable[str], environ: Mapping[str, str] | None = None
) -> list[str]:
    """``SWITCHBOARD_*`` variables (environment, ``.env``) that name none of the top-level
    ``settings``, each with the one it probably meant. (A wrong key inside a section, such
    as ``SWITCHBOARD_LLM__MODLE``, is refused at start, naming it.)"""
    env = os.environ if environ is None else environ
    sections = {name.upper(): name for name in settings}
    moved = {env_name(tuple(m.old.split("."))) for m in MOVES}
    named = {*env, *(k for k in read_dotenv(home / ".env") if k)}
    said = []
    for variable in sorted(named):
        if not variable.startswith(ENV_PREFIX) or variable in NOT_SETTINGS or variable in moved:
            continue
        top = variable.removeprefix(ENV_PREFIX).split("__", 1)[0]
        if top in sections:
            continue
        close = difflib.get_close_matches(top, list(sections), n=1)
        hint = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else ""
        said.append(f"{variable} names no setting (there is no `{top.lower()}`){hint}")
    return said


def report_unknown_variables(home: Path, settings: Iterable[str]) -> None:
    """A line in the log for each ``SWITCHBOARD_*`` variable that names no setting."""
    for line in unknown_variables(home, settings):
        log.warning("%s: ignored", line)


def _variable_sources(home: Path, env: Mapping[str, str], variable: str) -> list[str]:
    where = []
    if env.get(variable) is not None:
        where.append(f"environment variable {variable}")
    if read_dotenv(home / ".env").get(variable) is not None:
        where.append(f"{home / '.env'} ({variable})")
    secret = secrets_dir(home, env) / variable
    if secret.is_file():
        where.append(f"secret file {secret}")
    return where


def _get(document: Mapping[str, Any], dotted: str) -> Any:
    current: Any = document
    for name in dotted.split("."):
        if not isinstance(current, dict) or name not in current:
            return None
        current = current[name]
    return current.unwrap() if hasattr(current, "unwrap") else current


def _delete(document: TOMLDocument, dotted: str) -> tuple[list[str], str]:
    """Remove the key; returns the comment lines right above it (no blank line between:
    they describe it) and the comment at the end of its line. Both go with it."""
    from tomlkit.items import Comment, Null  # noqa: PLC0415 - see _rewrite

    *tables, key = dotted.split(".")
    table: Any = document
    for name in tables:
        table = table[name]
    # a table written in two parts (``[heartbeat.x]`` before ``[heartbeat]``) is a proxy
    item = table.item(key) if hasattr(table, "item") else table[key]
    comment = str(item.trivia.comment) if hasattr(item, "trivia") else ""
    container = getattr(table, "value", table)  # a table's, or the document's own
    body = getattr(container, "body", [])
    at = next((i for i, (name, _) in enumerate(body) if name and name.key == key), 0)
    above: list[str] = []
    while at > 0 and body[at - 1][0] is None and isinstance(body[at - 1][1], Comment):
        at -= 1
        above.insert(0, body[at][1].as_string().strip().lstrip("#").strip())
        body[at] = (None, Null())  # its place kept: the table's index of its keys stays right
    del table[key]
    return above, comment.lstrip("#").strip()


def _set(document: TOMLDocument, dotted: str, value: Any, comments: tuple[list[str], str]) -> None:
    import tomlkit  # noqa: PLC0415 - see _rewrite

    above, comment = comments
    *tables, key = dotted.split(".")
    table: Any = document
    for name in tables:
        if name not in table:
            table[name] = tomlkit.table()
        table = table[name]
    for line in above:
        table.add(tomlkit.comment(line))
    item = tomlkit.item(value)
    if comment:
        item.comment(comment)
    table[key] = item
