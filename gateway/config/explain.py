"""Configuration errors a person can fix: which key, who set it (file and line, environment
variable, ``.env`` line or secret file), and the key they probably meant.

pydantic reports ``llm.modle: Extra inputs are not permitted``; this turns it into
``llm.modle: unknown key; did you mean `model`? (config.toml line 12)``.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import SettingsError

from gateway.core.errors import ConfigError

ENV_PREFIX = "SWITCHBOARD_"
Loc = tuple[int | str, ...]


def env_name(loc: Loc) -> str:
    """The environment variable that sets a field: ``("llm", "model")`` → SWITCHBOARD_LLM__MODEL."""
    return ENV_PREFIX + "__".join(str(part).upper() for part in loc)


class Origin(StrEnum):
    """Where a setting's value in effect comes from (its default where none sets it)."""

    ENVIRONMENT = "environment"
    DOTENV = ".env"
    SECRET_FILE = "secret file"  # noqa: S105 - a source of settings, not a secret
    CONFIG_FILE = "config.toml"


@dataclass(frozen=True, slots=True)
class Sources:
    """Where settings come from, first wins: environment, ``.env``, secret files, config.toml."""

    config_file: Path
    dotenv_file: Path
    secrets_dir: Path
    environ: Mapping[str, str]
    dotenv: Mapping[str, str | None]
    # the keys a change (`config set`, the settings page) was refused for: not in the file
    given: tuple[Loc, ...] = ()
    given_by: str = "this change"  # how errors name who set them

    def origins(self, loc: Loc) -> list[str]:
        """Every source that sets ``loc`` (or a table containing it), the winning one first."""
        if any(tuple(str(p) for p in loc[: len(key)]) == key for key in self.given):
            return [self.given_by]
        found = []
        for depth in range(len(loc), 0, -1):  # SWITCHBOARD_LLM='{"modle": 1}' sets llm.modle
            name = env_name(loc[:depth])
            if _lookup(self.environ, name) is not None:
                found.append(f"environment variable {name}")
            if _lookup(self.dotenv, name) is not None:
                found.append(f"{self.dotenv_file} line {_dotenv_line(self.dotenv_file, name)}")
            secret = _secret_file(self.secrets_dir, name)
            if secret is not None:
                found.append(f"secret file {secret}")
        match = toml_line(self.config_file, loc)
        if match is not None and (match[1] or not found):  # a containing table: a hint only
            found.append(f"{self.config_file} line {match[0]}")
        return found

    def origin(self, loc: Loc) -> Origin | None:
        """The source whose value of ``loc`` is in effect (setting it or a table holding
        it), in the order sources win; ``None``: none sets it, its default applies."""
        names = [env_name(loc[:depth]) for depth in range(len(loc), 0, -1)]
        if any(_lookup(self.environ, name) is not None for name in names):
            return Origin.ENVIRONMENT
        if any(_lookup(self.dotenv, name) is not None for name in names):
            return Origin.DOTENV
        if any(_secret_file(self.secrets_dir, name) is not None for name in names):
            return Origin.SECRET_FILE
        match = toml_line(self.config_file, loc)
        return Origin.CONFIG_FILE if match is not None and match[1] else None


def validation_error(exc: ValidationError, root: type[BaseModel], sources: Sources) -> ConfigError:
    found = problems(exc, root, sources)
    lines = [f"  {dotted}: {what}" if dotted else f"  {what}" for dotted, what in found]
    first_field = next((dotted for dotted, _ in found if dotted), None)
    return ConfigError("Invalid configuration:\n" + "\n".join(lines), field=first_field)


def problems(
    exc: ValidationError, root: type[BaseModel], sources: Sources
) -> list[tuple[str, str]]:
    """Each problem as (dotted key, what is wrong and who set it); the key is "" for a
    check across sections, whose message names the settings itself."""
    found = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        dotted = ".".join(str(part) for part in loc)
        if error["type"] == "extra_forbidden":
            what = "unknown key" + suggestion(root, loc)
        else:
            what = error["msg"].removeprefix("Value error, ")
        if not loc:
            found.append(("", what))
            continue
        origins = sources.origins(loc)
        where = (
            " and ".join(origins)
            if origins
            else f"{env_name(loc)} or {sources.config_file.name} key {dotted}"
        )
        found.append((dotted, f"{what} (set by {where})"))
    return found


def settings_error(exc: SettingsError) -> ConfigError:
    """Name the section and its environment variables; the library's message only says
    'error parsing value for field "<section>"'."""
    match = re.search(r'field "([^"]+)"', str(exc))
    section = match.group(1) if match else ""
    prefix = env_name((section,)) if section else ENV_PREFIX
    cause = f": {exc.__cause__}" if exc.__cause__ else ""
    return ConfigError(
        f"Invalid configuration: {prefix} or a {prefix}__* environment variable could not be "
        f"parsed{cause}. "
        'Lists take JSON (["a", "b"]) or comma-separated values (a,b); tables take JSON.',
        field=section or None,
    )


def suggestion(root: type[BaseModel], loc: Loc) -> str:
    """``; did you mean `model`?`` for the closest key of the same table, or where a key of
    that name belongs (``; `name` belongs in [agent]``); empty when nothing is close."""
    parent = model_at(root, loc[:-1])
    key = str(loc[-1])
    if parent is not None:
        close = difflib.get_close_matches(key.lower(), list(parent.model_fields), n=1, cutoff=0.6)
        if close:
            return f"; did you mean `{close[0]}`?"
    homes = [".".join(path) for path in _tables(root, ()) if key in _fields(root, path)]
    if homes:
        return f"; `{key}` belongs in [{homes[0]}]" if homes[0] else f"; `{key}` is a top-level key"
    return ""


def model_at(root: type[BaseModel], path: Sequence[int | str]) -> type[BaseModel] | None:
    """The settings class at ``path`` (through nested sections, dict values, list items)."""
    current: Any = root
    keyed = False  # the next part is a key of a dict (``agents.<name>``), not a field
    for part in path:
        if isinstance(part, int) or keyed:  # an item of [[routes]] or a dict's key
            keyed = False
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        keyed = typing.get_origin(field.annotation) is dict
        current = _unwrap(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """The model inside ``X | None``, ``dict[str, X]``, ``tuple[X, ...]``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        models = [_unwrap(a) for a in typing.get_args(annotation) if a is not type(None)]
        return models[0] if len(models) == 1 else None
    if origin is dict:
        return _unwrap(typing.get_args(annotation)[1])
    if origin in (tuple, list):
        return _unwrap(typing.get_args(annotation)[0])
    return annotation


def _tables(root: type[BaseModel], path: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = [path]
    for name, field in root.model_fields.items():
        inner = field.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            found.extend(_tables(inner, (*path, name)))
    return found


def _fields(root: type[BaseModel], path: tuple[str, ...]) -> dict[str, Any]:
    model = model_at(root, path)
    return dict(model.model_fields) if model is not None else {}


# -- finding the line ---------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def toml_line(path: Path, loc: Loc) -> tuple[int, bool] | None:
    """The line of config.toml that sets ``loc``, and whether it is the key itself (not the
    table or inline table containing it).

    A line scanner, not a parser: headers (``[a.b]``, ``[[routes]]`` with their index) and
    ``key =`` lines, skipping multi-line strings; enough to point a person at the line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    wanted = tuple(str(p) for p in loc)
    table: tuple[str, ...] = ()
    counts: dict[tuple[str, ...], int] = {}
    best: tuple[int, int] | None = None  # (matched depth, line)
    in_string = False
    for number, line in enumerate(text.splitlines(), start=1):
        opens_or_closes = bool(line.count('"""') % 2 or line.count("'''") % 2)
        if in_string:
            in_string = not opens_or_closes
            continue
        in_string = opens_or_closes  # the key on this line still counts
        header = _HEADER.match(line)
        if header:
            names = _split_key(header.group(2))
            if header.group(1) == "[[":
                index = counts.get(names, 0)
                counts[names] = index + 1
                table = (*names, str(index))
            else:
                table = names
            best = _better(best, table, wanted, number)
            continue
        key = _KEY.match(line)
        if key:
            best = _better(best, (*table, *_split_key(key.group(1))), wanted, number)
    return None if best is None else (best[1], best[0] == len(wanted))


def _better(
    best: tuple[int, int] | None, path: tuple[str, ...], wanted: tuple[str, ...], line: int
) -> tuple[int, int] | None:
    if len(path) > len(wanted) and path[: len(wanted)] == wanted:
        path = wanted  # the first [[llm.fallbacks]] item stands for the whole list
    if path != wanted[: len(path)]:
        return best
    if best is None or len(path) > best[0]:
        return (len(path), line)
    return best


def _split_key(key: str) -> tuple[str, ...]:
    parts = re.findall(r'"([^"]*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)', key)
    return tuple(next(p for p in groups if p) if any(groups) else "" for groups in parts)


def _lookup(values: Mapping[str, Any], name: str) -> Any:
    lowered = name.lower()
    return next((v for k, v in values.items() if k.lower() == lowered), None)


def _dotenv_line(path: Path, name: str) -> int | str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return "?"
    pattern = re.compile(rf"^\s*(?:export\s+)?{re.escape(name)}\s*=", re.IGNORECASE)
    return next((n for n, line in enumerate(lines, start=1) if pattern.match(line)), "?")


def _secret_file(directory: Path, name: str) -> Path | None:
    try:
        return next((p for p in directory.iterdir() if p.name.lower() == name.lower()), None)
    except OSError:
        return None
