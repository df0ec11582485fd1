"""Settings for ``switchboard doctor`` when the configuration has errors.

The gateway refuses to start on a bad key; ``doctor`` should report it as one failed check
and still check everything else (so do ``config``, ``api`` and ``upgrade``). So it loads what the sources say, drops the keys that
failed, and validates the rest; if even that fails, the defaults stand in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
)

from gateway.config.settings import Settings, load_settings
from gateway.config.sources import home_from, sources_for
from gateway.core.errors import ConfigError

MAX_ROUNDS = 5  # dropping keys can reveal errors that depended on them; give up after this


class _GivenOnly(Settings):
    """The same settings, read from the arguments only (the sources were read already)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def load_what_is_valid(
    *, move: bool = False, **overrides: Any
) -> tuple[Settings, ConfigError | None]:
    """The settings, and the error :func:`load_settings` raised (None when there was none).
    ``move``: renamed keys are moved in config.toml first, as every command but ``doctor``
    and ``upgrade`` (which report them, changing nothing) does."""
    try:
        return load_settings(move=move, **overrides), None
    except ConfigError as exc:
        problem = exc
    try:
        data = _merged(overrides)
    except Exception:  # a source that cannot even be read (bad TOML, bad JSON in env)
        return _GivenOnly(home=home_from(overrides)), problem
    for _ in range(MAX_ROUNDS):
        try:
            return _GivenOnly(**data), problem
        except ValidationError as exc:
            dropped = [_drop(data, tuple(error["loc"])) for error in exc.errors()]
            if not any(dropped):
                break
    return _GivenOnly(home=home_from(overrides)), problem


def _merged(overrides: dict[str, Any]) -> dict[str, Any]:
    sources = sources_for(
        Settings,
        InitSettingsSource(Settings, init_kwargs=overrides),
        EnvSettingsSource(Settings),
        SecretsSettingsSource(Settings),
    )
    merged: dict[str, Any] = {}
    for source in reversed(sources):  # the first source wins: apply it last
        _deep_update(merged, source())
    return merged


def _deep_update(target: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_update(target[key], value)
        else:
            target[key] = value


def _child(container: Any, part: int | str) -> Any:
    if isinstance(container, dict):
        return container.get(part)
    if isinstance(container, list) and isinstance(part, int) and part < len(container):
        return container[part]
    return None


def _drop(data: Any, loc: Iterable[int | str]) -> bool:
    """Remove the value at ``loc`` (or the closest container of it that exists)."""
    parts = list(loc)
    if not parts:
        return False
    current = data
    for part in parts[:-1]:
        inner = _child(current, part)
        if inner is None:
            return _drop(data, parts[:-1])
        current = inner
    last = parts[-1]
    if isinstance(current, dict) and last in current:
        del current[last]
        return True
    if isinstance(current, list) and isinstance(last, int) and last < len(current):
        del current[last]
        return True
    return _drop(data, parts[:-1]) if len(parts) > 1 else False
