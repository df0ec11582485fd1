"""config.toml: its commented template, its text, and changes to it.

A change keeps the file's comments, order and blank lines (:mod:`gateway.config.toml.edit`)
and replaces the file at once, through a temporary file renamed over it (mode 0600: it may
hold a token); a config.toml that is a link (kept in a dotfiles repository) stays one.
:func:`change_config` is what ``switchboard config set`` and the settings page of the web
server both use: a secret goes to the home's ``.env`` instead (:mod:`gateway.config.env_file`;
a copy config.toml held is taken out of it), the whole configuration is loaded again as at
start, every source merged, and a change it refuses is taken back, naming each field and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import TypeAdapter, ValidationError

from gateway.config.env_file import (
    DOTENV,
    as_text,
    forget_secret,
    save_secret,
    secret_key,
    variable,
)
from gateway.config.explain import model_at, problems, validation_error
from gateway.config.settings import Settings, load_settings
from gateway.config.sources import describe, read_config, read_toml
from gateway.config.toml.edit import delete_key, set_key
from gateway.core.errors import ConfigError
from gateway.core.system.fileutil import write_atomic


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()  # a change that takes the key out of the file (its default applies)


class ConfigRefused(ConfigError):
    """A change the configuration would not load with; config.toml is as it was.
    ``problems``: (dotted key, what is wrong and who set it) each; the key is "" for a
    check across sections."""

    def __init__(self, message: str, problems: tuple[tuple[str, str], ...]) -> None:
        super().__init__(message, field=next((key for key, _ in problems if key), None))
        self.problems = problems


def config_template() -> str:
    """The commented config.toml a new home starts with."""
    return resources.files("gateway.config").joinpath("templates/config.toml").read_text("utf-8")


def config_text(path: Path) -> str:
    """config.toml's text, or the template's while there is no file yet."""
    return read_config(path) if path.exists() else config_template()


def write_config(path: Path, text: str) -> None:
    """Replace config.toml at once (mode 0600). A link's target is replaced."""
    write_atomic(path.resolve(), text, mode=0o600)


def write_key(path: Path, dotted: str, value: Any) -> str:
    """Set one key in the file, a new one started from the commented template; returns the
    old text (the template's for a new file). Nothing is checked: see :func:`change_config`."""
    old = config_text(path)
    write_config(path, set_key(old, dotted, value))
    return old


def edited(text: str, edits: Mapping[str, Any]) -> str:
    """``text`` with each dotted key set to its value, or taken out for :data:`UNSET`.
    Raises :class:`ValueError` for a value TOML cannot hold where the key would go."""
    for dotted, value in edits.items():
        text = delete_key(text, dotted) if value is UNSET else set_key(text, dotted, value)
    return text


@dataclass(frozen=True, slots=True)
class Before:
    """The home's files as they were before a change, to put back when it is refused.
    ``dotenv``: ``.env``'s text when the change wrote it (None: it did not; "" there was
    none)."""

    home: Path
    config: str  # config.toml's text (the template's when there was no file)
    dotenv: str | None = None

    def put_back(self) -> None:
        write_config(self.home / "config.toml", self.config)
        if self.dotenv is None:
            return
        dotenv = self.home / DOTENV
        if self.dotenv:
            write_atomic(dotenv, self.dotenv, mode=0o600)
        else:
            dotenv.unlink(missing_ok=True)


def change_config(
    home: Path, edits: Mapping[str, Any], *, by: str = "this change"
) -> tuple[Before, Settings]:
    """Write ``edits`` into ``home``'s config.toml in one replacement, a secret's into
    ``.env`` (taken out of config.toml), and load the whole configuration as the gateway
    does at start. Returns the files as they were and the settings now in effect; raises
    :class:`ConfigRefused` (the files put back, every problem named, a value of this change
    as set by ``by``); before writing anything, :class:`ValueError` for a value TOML cannot
    hold and :class:`~gateway.core.errors.ConfigFileUnreadable` for a config.toml or
    ``.env`` that cannot be read (it is fixed in an editor)."""
    path = home / "config.toml"
    if path.exists():
        read_toml(path)
    secrets = {key: value for key, value in edits.items() if secret_key(key)}
    dotenv = home / DOTENV
    before = Before(
        home,
        config_text(path),
        (read_config(dotenv) if dotenv.exists() else "") if secrets else None,
    )
    check_alone(edits, by=by)
    text = edited(before.config, {**edits, **dict.fromkeys(secrets, UNSET)})
    if text != before.config or not path.exists():
        write_config(path, text)
    for key, value in secrets.items():
        if value is UNSET:
            forget_secret(home, variable(key))
        else:
            save_secret(home, variable(key), as_text(value))
    try:
        return before, load_settings(home=home)
    except ConfigError as exc:
        before.put_back()  # never leave files the gateway refuses
        raise refused(exc, home, tuple(edits), by=by) from exc


def check_alone(edits: Mapping[str, Any], *, by: str) -> None:
    """Each value of a change must be valid by itself, not only under what wins over the
    file: a value in the environment or .env would hide a bad one written to config.toml,
    and the first start without that variable would refuse it. Raises :class:`ConfigRefused`."""
    found = []
    for key, value in edits.items():
        parts = key.split(".")
        parent = model_at(Settings, parts[:-1])
        field = None if parent is None else parent.model_fields.get(parts[-1])
        if value is UNSET or field is None:
            continue
        shape: Any = field.annotation
        if field.metadata:  # its bounds (ge=64, ...)
            shape = Annotated[(shape, *field.metadata)]
        try:
            TypeAdapter(shape).validate_python(value)
        except ValidationError as exc:
            why = "; ".join(e["msg"] for e in exc.errors())
            found.append((key, f"{key}: {why} (set by {by})"))
    if found:
        raise ConfigRefused("; ".join(why for _, why in found), tuple(found))


def refused(exc: ConfigError, home: Path, keys: tuple[str, ...], *, by: str) -> ConfigRefused:
    """The refusal told against the file as it is again (the lines it names are the ones
    the person sees), with the keys of the change named as set by it, not as lines of a file
    they are no longer in."""
    cause = exc.__cause__
    if not isinstance(cause, ValidationError):
        return ConfigRefused(str(exc), ((exc.field or "", str(exc)),))
    given = tuple(tuple(key.split(".")) for key in keys)
    sources = replace(describe(home), given=given, given_by=by)
    told = validation_error(cause, Settings, sources)
    return ConfigRefused(str(told), tuple(problems(cause, Settings, sources)))
