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
from pathlib import Path
from typing import Any

from dotenv import set_key, unset_key

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
