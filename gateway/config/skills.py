"""``[skills]``: where ``switchboard skills`` finds skills by name, and the secrets skills get.

``registries`` are URLs of index files (docs/tools.md#installing-skills), searched in order;
``SWITCHBOARD_SKILLS__REGISTRIES`` takes them as a JSON list. ``secrets`` are values a
skill's script receives as environment variables when the skill declares the name
(``secrets: [WEATHER_API_KEY]``), and no other skill, no prompt and no log ever sees them:
keep them in ``.env`` (``SWITCHBOARD_SKILLS__SECRETS='{"WEATHER_API_KEY": "..."}'``) or a
secret file, like every other secret.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

from gateway.config.channels import StrList

_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")


class SkillSettings(BaseModel):
    """Where `switchboard skills install NAME` finds skills, and the secrets a skill's script may be given ([tools.md](tools.md#installing-skills))."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    registries: StrList = ()  # URLs of skill index files (JSON), searched in order
    secrets: dict[str, SecretStr] = {}  # NAME = value, for the skills that declare NAME

    @field_validator("registries")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if not re.match(r"^https?://", url):
                raise ValueError(f"{url!r} is not an http(s) URL of an index file")
        return value

    @field_validator("secrets")
    @classmethod
    def _names(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        # Environment variables come lower-cased through nested keys: names are upper case.
        named = {key.upper(): secret for key, secret in value.items()}
        for key in named:
            if not _NAME.match(key):
                raise ValueError(f"{key!r} is not an environment variable name (A-Z, 0-9, _)")
        return named
