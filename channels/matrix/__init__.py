"""Matrix channel (matrix-nio), see docs/channels.md#matrix.

Modules: ``adapter`` (lifecycle, invites, rooms), ``intake`` (``/sync`` with the token
stored only after journaling), ``encrypted`` (encrypted rooms: told why, then left),
``convert`` (pure event → InboundMessage), ``media``
(inbound files), ``render`` (markdown → body and HTML, splitting), ``sender`` (parts with
deterministic transaction ids, drafts edited with ``m.replace``), ``state`` (the device id),
``probe`` (``doctor``).

matrix-nio is an optional dependency (the ``[matrix]`` extra), imported only when the channel
is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.core.errors import ConfigError
from gateway.core.install import install_command

if TYPE_CHECKING:
    from channels.matrix.adapter import MatrixChannel
    from gateway.config.settings import Settings

__all__ = ["create"]


def create(settings: Settings) -> MatrixChannel:
    try:
        from channels.matrix.adapter import MatrixChannel  # noqa: PLC0415 - nio only when on
    except ImportError as exc:
        if "nio" not in str(exc):
            raise
        raise ConfigError(
            f"the Matrix channel needs matrix-nio: {install_command('matrix')} "
            "(or unset SWITCHBOARD_MATRIX__HOMESERVER)",
            field="matrix.homeserver",
        ) from exc
    return MatrixChannel(settings)
