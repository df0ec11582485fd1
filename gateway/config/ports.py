"""The TCP ports the running gateway listens on, for the sandbox's port guard.

Networked sandboxes (``tools.exec.network``, MCP servers) may not connect to any of them
(:mod:`gateway.core.system.portguard`). The configured ports are known from the settings (a
channel's own, :meth:`~gateway.config.channels.ChannelSection.listen_ports`); a web
server started on ``web.port = 0`` writes the port it got into ``data/web.json``
(:mod:`gateway.web.endpoint`), read here at each sandbox start.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from gateway.config.settings import Settings

ENDPOINT_FILE = "web.json"  # gateway.web.endpoint.ENDPOINT_FILE


def gateway_ports(settings: Settings) -> set[int]:
    """Every port this gateway listens on or will listen on (0s left out)."""
    ports = {settings.web.port if settings.web.enabled else 0}
    for section in settings.channel_sections().values():
        ports.update(section.listen_ports())
    try:
        url = json.loads((settings.data_dir / ENDPOINT_FILE).read_text(encoding="utf-8"))["url"]
        live = urlsplit(str(url)).port
    except (OSError, ValueError, KeyError, TypeError):
        live = None
    if live:
        ports.add(live)
    ports.discard(0)
    return ports
