"""Saving secrets a command was told into the home's ``.env``.

Secrets go to ``$SWITCHBOARD_HOME/.env`` (mode 0600, made private before the value goes in),
where the settings read them (:mod:`gateway.config.sources`), never into config.toml or the
shell history. config.toml itself is written by :mod:`gateway.config.toml.config_file`.
"""

from __future__ import annotations

from pathlib import Path

from dotenv import set_key


def save_secret(home: Path, variable: str, value: str) -> Path:
    """``variable=value`` in the home's ``.env`` (its line replaced, or added); the file."""
    dotenv = home / ".env"
    dotenv.parent.mkdir(parents=True, exist_ok=True)
    dotenv.touch(mode=0o600, exist_ok=True)
    dotenv.chmod(0o600)
    set_key(dotenv, variable, value, quote_mode="always")
    return dotenv
