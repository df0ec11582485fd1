"""Saving what a command was told into the home: config.toml whole and at once, secrets
into ``.env``.

config.toml is written through a temporary file renamed over it, so a command stopped
half-way leaves the old file or the new one, never half of one; a new file starts from the
commented template. Secrets go to ``$SWITCHBOARD_HOME/.env`` (mode 0600, made private
before the value goes in), where the settings read them (:mod:`gateway.config.sources`),
never into config.toml or the shell history.
"""

from __future__ import annotations

from pathlib import Path

from dotenv import set_key

from gateway.core.system.fileutil import write_atomic
from gateway.runtime.home import config_template


def config_text(path: Path) -> str:
    """config.toml's text, or the template's while there is no file yet."""
    return path.read_text(encoding="utf-8") if path.exists() else config_template()


def write_config(path: Path, text: str) -> None:
    """Replace config.toml at once (mode 0600: it may hold a token). A config.toml that is a
    link (kept in a dotfiles repository) stays one: its target is replaced."""
    write_atomic(path.resolve(), text, mode=0o600)


def save_secret(home: Path, variable: str, value: str) -> Path:
    """``variable=value`` in the home's ``.env`` (its line replaced, or added); the file."""
    dotenv = home / ".env"
    dotenv.parent.mkdir(parents=True, exist_ok=True)
    dotenv.touch(mode=0o600, exist_ok=True)
    dotenv.chmod(0o600)
    set_key(dotenv, variable, value, quote_mode="always")
    return dotenv
