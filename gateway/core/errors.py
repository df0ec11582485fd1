"""The exception tree shared by the gateway, the channels and the agent.

Retry and policy decisions branch on these types, never on message strings::

    SwitchboardError
    ├── ConfigError                 invalid or missing configuration (fail fast at start)
    │   ├── ConfigFileUnreadable    config.toml or .env cannot be read (not UTF-8, not TOML)
    │   └── PortInUse               another program listens on a port a setting names
    ├── StoreError                  the durable store could not be used
    │   ├── StorageFullError        the disk is full; inbound is not acknowledged
    │   ├── StoreDamagedError       the database file is damaged, foreign or too new: no start
    │   ├── StoreUnavailable        the database server cannot be reached (storage.url)
    │   └── StaleClaim              a write for a session another node claimed since
    ├── ChannelError                a platform adapter failed
    │   ├── ChannelRateLimited      the platform asked us to wait ``retry_after`` seconds
    │   ├── ChannelTransientError   network or 5xx; retry with backoff
    │   └── ChannelPermanentError   the message can never be delivered (chat gone, forbidden)
    └── AnotherInstanceRunning      the data directory is locked by another process
"""

from __future__ import annotations

from pathlib import Path


class SwitchboardError(Exception):
    """Base class of every error Switchboard raises on purpose."""


class ConfigError(SwitchboardError):
    """Configuration is invalid. ``field`` names the offending setting."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConfigFileUnreadable(ConfigError):
    """config.toml or ``.env`` cannot be read as it is (a byte that is not UTF-8, TOML that
    does not parse): a person fixes it in the file, ``path``."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message, field=str(path))
        self.path = path


class PortInUse(ConfigError):
    """Another program listens on the port a setting names (``field``; ``port``). No
    restart frees it: a person stops that program or sets another port, so it has an exit
    status of its own that the service does not restart on (gateway/cli/exit_codes.py)."""

    def __init__(self, message: str, *, field: str, port: int) -> None:
        super().__init__(message, field=field)
        self.port = port


def env_variable(field: str) -> str:
    """The environment variable of a setting: ``web.port`` is ``SWITCHBOARD_WEB__PORT``."""
    return "SWITCHBOARD_" + "__".join(part.upper() for part in field.split("."))


def not_set(field: str, *, secret: bool = False) -> ConfigError:
    """A setting a channel cannot start without, named as config.toml and the environment
    name it: ``irc.server`` is ``server`` under ``[irc]``, or ``SWITCHBOARD_IRC__SERVER``;
    a secret belongs in ``.env``."""
    section, _, key = field.partition(".")
    variable = env_variable(field)
    if secret:
        return ConfigError(f"{field} is not set: put {variable}=... in .env", field=field)
    return ConfigError(
        f"{field} is not set: add {key} = ... under [{section}] in config.toml (or set {variable})",
        field=field,
    )


class StoreError(SwitchboardError):
    """The durable store failed."""


class StorageFullError(StoreError):
    """The disk holding the store is full."""


class StoreDamagedError(StoreError):
    """The database file cannot be used as it is (damaged, another program's, written by a
    newer version). The gateway refuses to start; ``path`` is the file."""

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class SchemaRefused(StoreError):
    """The store's schema is not one this Switchboard may use as it is: newer than it knows
    (an older node after a newer one migrated), or older and its migration waits for the
    owner's word that a backup exists (PostgreSQL). Nothing was changed."""


class StoreUnavailable(StoreError):
    """The database server (``storage.url``) cannot be reached; work waits until it is back."""


class StaleClaim(StoreError):
    """A write for a session this node no longer holds: another node claimed the session
    since (its epoch moved on), so the database refused it. The node must drop the session's
    work; the other node resumes it (gateway/store/cluster/fencing.py)."""


class ChannelError(SwitchboardError):
    """A channel adapter could not complete an operation."""


class ChannelRateLimited(ChannelError):
    """The platform asked us to slow down for ``retry_after`` seconds."""

    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(f"{message} (retry after {retry_after:.1f}s)")
        self.retry_after = retry_after


class ChannelTransientError(ChannelError):
    """A failure that may succeed when retried (network, 5xx)."""


class ChannelPermanentError(ChannelError):
    """A failure that retrying cannot fix (unknown chat, bot blocked, bad request)."""


class AnotherInstanceRunning(SwitchboardError):
    """Another Switchboard process holds the lock on the data directory."""
