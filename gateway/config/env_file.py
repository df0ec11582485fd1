"""Secrets and the home's ``.env``: which settings are secrets, and writing them there.

A setting is a secret when its type holds a :class:`~pydantic.SecretStr` (``llm.api_key``,
``telegram.token``, ``skills.secrets``, an agent's ``api_key``): the same test the reference
(docs/configuration.md), the settings page and ``switchboard doctor`` use. A secret a command
is told (onboarding, ``switchboard config set``, the settings page, ``api token``) goes to
``$SWITCHBOARD_HOME/.env`` as its ``SWITCHBOARD_*`` variable (the file 0600, made private
before the value goes in; its other lines kept), where the settings read it
(:mod:`gateway.config.sources`), never into config.toml, which is shared, copied and backed
up more readily.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import set_key, unset_key
from pydantic import BaseModel

from gateway.config.explain import env_name, model_at
from gateway.config.settings import Settings
from gateway.config.sources import read_dotenv

DOTENV = ".env"


def holds_secret(annotation: Any) -> bool:
    """Whether a setting of this type is a secret (a ``SecretStr``, or a table of them)."""
    return "SecretStr" in str(annotation)


def secret_key(dotted: str) -> bool:
    """Whether the setting at ``dotted`` (``llm.api_key``, ``agents.work.api_key``) is a
    secret; False for a key that names no setting."""
    *path, name = dotted.split(".")
    parent = model_at(Settings, path)
    field = None if parent is None else parent.model_fields.get(name)
    return field is not None and holds_secret(field.annotation)


SettingPath = tuple[str | int, ...]  # where a value is written: ("llm", "fallbacks", 0, "api_key")


def written_secrets(data: Mapping[str, Any]) -> list[SettingPath]:
    """Every secret written in ``data`` (config.toml's tables), wherever it is: a section's
    key (``llm.api_key``), a named table's (``hooks.ci.secret``, ``agents.work.api_key``,
    ``mcp.servers.remote.headers``), a list item's (``llm.fallbacks[0].api_key``,
    ``api.tokens[1].token``). Which keys are secrets is what the settings' types say
    (:func:`holds_secret`); keys that name no setting are left to the configuration check."""
    found: list[SettingPath] = []
    _walk_model(Settings, data, (), found)
    return found


def _walk_model(
    model: type[BaseModel], data: Mapping[str, Any], path: SettingPath, found: list[SettingPath]
) -> None:
    for name, value in data.items():
        field = model.model_fields.get(name)
        if field is not None:
            _walk(field.annotation, value, (*path, name), found)


def _walk(annotation: Any, value: Any, path: SettingPath, found: list[SettingPath]) -> None:
    if value is None or value in ("", {}, []):
        return  # nothing written there
    if holds_secret(annotation):
        found.append(path)
        return
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for inner in typing.get_args(annotation):
            if inner is not type(None):
                _walk(inner, value, path, found)
        return
    if origin is dict and isinstance(value, Mapping):
        inner = typing.get_args(annotation)[1]
        for key, item in value.items():
            _walk(inner, item, (*path, str(key)), found)
    elif origin in (list, tuple) and isinstance(value, list):
        inner = typing.get_args(annotation)[0]
        for index, item in enumerate(value):
            _walk(inner, item, (*path, index), found)
    elif (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and isinstance(value, Mapping)
    ):
        _walk_model(annotation, value, path, found)


def dotted(path: SettingPath) -> str:
    """A setting's path as people write it: ``llm.fallbacks[0].api_key``."""
    said = ""
    for part in path:
        said += f"[{part}]" if isinstance(part, int) else f".{part}" if said else part
    return said


def variable(dotted: str) -> str:
    """The variable that sets ``dotted`` in ``.env``: ``SWITCHBOARD_LLM__API_KEY``."""
    return env_name(tuple(dotted.split(".")))


def save_secret(home: Path, name: str, value: str) -> Path:
    """``name=value`` in the home's ``.env`` (its line replaced, or added); the file."""
    dotenv = home / DOTENV
    dotenv.parent.mkdir(parents=True, exist_ok=True)
    dotenv.touch(mode=0o600, exist_ok=True)
    dotenv.chmod(0o600)
    set_key(dotenv, name, value, quote_mode="always")
    return dotenv


def forget_secret(home: Path, name: str) -> None:
    """Take ``name``'s line out of the home's ``.env`` (nothing when it has none)."""
    dotenv = home / DOTENV
    if name in read_dotenv(dotenv):
        unset_key(dotenv, name)


def as_text(value: Any) -> str:
    """A setting's value as its ``.env`` line holds it: text as it is, lists and tables as
    JSON (``SWITCHBOARD_SKILLS__SECRETS='{"WEATHER_API_KEY": "..."}'``)."""
    plain = value.unwrap() if hasattr(value, "unwrap") else value  # a TOML item
    return plain if isinstance(plain, str) else json.dumps(plain)
