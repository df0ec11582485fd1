"""Where settings come from, first wins: arguments, the environment, ``$SWITCHBOARD_HOME/.env``,
secret files (``$SWITCHBOARD_HOME/secrets/`` or ``$SWITCHBOARD_SECRETS_DIR``), config.toml.

``.env`` holds ``SWITCHBOARD_*`` lines (``SWITCHBOARD_LLM__API_KEY=sk-...``), plus the
``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` fallbacks of ``llm.api_key``; other lines are
ignored. A secret file is named like the variable (``SWITCHBOARD_TELEGRAM__TOKEN``) and holds
the bare value, the way Docker and systemd hand out secrets.
"""

from __future__ import annotations

import io
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from dotenv.parser import parse_stream
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    NestedSecretsSettingsSource,
    PydanticBaseSettingsSource,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from gateway.config.explain import ENV_PREFIX, Sources
from gateway.core.errors import ConfigError, ConfigFileUnreadable

DEFAULT_HOME = Path("~/.switchboard")
SECRETS_DIR_VARIABLE = f"{ENV_PREFIX}SECRETS_DIR"


def home_from(overrides: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Path:
    """The home before the settings exist: an explicit argument, then SWITCHBOARD_HOME."""
    env = os.environ if environ is None else environ
    home = overrides.get("home") or env.get(f"{ENV_PREFIX}HOME") or DEFAULT_HOME
    return Path(home).expanduser()


def secrets_dir(home: Path, environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    chosen = env.get(SECRETS_DIR_VARIABLE)
    return Path(chosen).expanduser() if chosen else home / "secrets"


def describe(home: Path) -> Sources:
    """The sources as they are now, for error messages that name who set a key."""
    dotenv = home / ".env"
    return Sources(
        config_file=home / "config.toml",
        dotenv_file=dotenv,
        secrets_dir=secrets_dir(home),
        environ=dict(os.environ),
        dotenv=read_dotenv(dotenv),
    )


def read_config(path: Path) -> str:
    """The text of config.toml or ``.env``. A byte that is not UTF-8 (the file saved as
    Latin-1, or damaged) is refused naming the file, its line and the byte, as every command
    reads these files."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise ConfigFileUnreadable(
            f"{path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column "
            f"{column} (offset {exc.start}) cannot be read; save the file as UTF-8, or type "
            "that character again in an editor that does",
            path=path,
        ) from exc


def read_toml(path: Path) -> dict[str, Any]:
    """config.toml's tables; refused naming the file when it is not UTF-8 or not TOML."""
    try:
        return tomllib.loads(read_config(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileUnreadable(f"{path} is not valid TOML: {exc}", path=path) from exc


def read_dotenv(path: Path) -> dict[str, str | None]:
    """The variables of ``.env``. A line that does not parse is left out here, silently
    (python-dotenv would log a warning without the file's name each time the file is read):
    :func:`check_dotenv` refuses it once, naming the file and the line."""
    if not path.is_file():
        return {}
    lines = parse_stream(io.StringIO(read_config(path)))
    readable = "".join(line.original.string for line in lines if not line.error)
    return dict(dotenv_values(stream=io.StringIO(readable)))


_NAMED = re.compile(r"\s*(?:export\s+)?([^\s=#]+)\s*=")


def check_dotenv(path: Path) -> None:
    """Refuse a ``.env`` with a line that does not parse, naming the file, the line and its
    variable (never its value: it may be a key). Such a line would otherwise be dropped,
    and the setting it holds silently not set."""
    if not path.is_file():
        return
    for line in parse_stream(io.StringIO(read_config(path))):
        if not line.error:
            continue
        where = f"{path} line {line.original.line}"
        named = _NAMED.match(line.original.string)
        if named is not None:
            raise ConfigError(
                f"{where}: the value of {named.group(1)} cannot be read (a quote that is not "
                "closed, or text after the closing quote); correct that line or delete it"
            )
        raise ConfigError(
            f"{where} is not a NAME=value line; correct it, delete it, or make it a comment (#)"
        )


class HomeDotEnv(DotEnvSettingsSource):
    """``$SWITCHBOARD_HOME/.env``: only lines that name a setting; ``OPENAI_API_KEY`` and
    other variables in the same file are not settings (and not errors). Read as
    :func:`read_dotenv` reads it, the same for every source and command."""

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        return {k: v for k, v in data.items() if k in self.settings_cls.model_fields}

    def _read_env_file(self, file_path: Path) -> Mapping[str, str | None]:
        return parse_env_vars(
            read_dotenv(file_path),
            self.case_sensitive,
            self.env_ignore_empty,
            self.env_parse_none_str,
        )


def sources_for(
    settings_cls: type[BaseSettings],
    init_settings: PydanticBaseSettingsSource,
    env_settings: PydanticBaseSettingsSource,
    file_secret_settings: PydanticBaseSettingsSource,
) -> tuple[PydanticBaseSettingsSource, ...]:
    home = home_from(getattr(init_settings, "init_kwargs", {}))
    return (
        init_settings,
        env_settings,
        HomeDotEnv(settings_cls, env_file=home / ".env"),
        NestedSecretsSettingsSource(
            file_secret_settings, secrets_dir=secrets_dir(home), secrets_dir_missing="ok"
        ),
        TomlConfigSettingsSource(settings_cls, toml_file=home / "config.toml"),
    )


def dotenv_api_key(home: Path, variable: str) -> str | None:
    """``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` from the home's ``.env`` (the real
    environment is read by :meth:`LLMSettings.resolved_api_key` itself). A ``.env`` that
    cannot be read has none: ``load_settings`` refuses it before, and ``doctor`` says so."""
    try:
        value = read_dotenv(home / ".env").get(variable)
    except ConfigFileUnreadable:
        return None
    return value or None
