"""A TCP address the gateway listens on (the web server, Telegram's webhook, Slack's Events
API), with the settings that name it, so that a bind that fails says which setting to change
instead of an ``OSError`` traceback.

The gateway probes each before it opens the store or connects a channel
(:meth:`Listener.probe`): a port another program holds stops the start while nothing has
changed yet. The listener's own bind, later, says the same when it fails
(:meth:`Listener.refused`)."""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

from gateway.core.errors import ConfigError, PortInUse, env_variable


@dataclass(frozen=True, slots=True)
class Listener:
    what: str  # who listens, said to a person: "the web server", "the Telegram webhook"
    host: str
    port: int  # 0: any free port (tests), which never fails for being taken
    host_setting: str  # "web.host"
    port_setting: str  # "web.port"
    off: str = ""  # how to do without it, when there is a way: "web.enabled = false"

    def probe(self) -> None:
        """Bind as the server will (``SO_REUSEADDR``, as aiohttp does) and let go at once;
        raise what :meth:`refused` says when that fails."""
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
        except OSError as exc:
            raise self.refused(exc) from exc

    def refused(self, exc: OSError) -> ConfigError:
        """The error for a bind that failed with ``exc``, naming the setting to change: a
        port in use is :class:`PortInUse` (its own exit status); an address that is not
        this machine's, or a port below 1024 without the privilege, a :class:`ConfigError`
        of the host or the port."""
        where = f"{self.what} cannot listen on {self.host}:{self.port}"
        port = f"{self.port_setting} ({env_variable(self.port_setting)})"
        host = f"{self.host_setting} ({env_variable(self.host_setting)})"
        instead = f", or {self.off}" if self.off else ""
        if exc.errno == errno.EADDRINUSE:
            return PortInUse(
                f"{where}: another program listens on port {self.port}. Stop it, or set "
                f"{port} to a free port{instead}",
                field=self.port_setting,
                port=self.port,
            )
        if exc.errno == errno.EACCES:
            return ConfigError(
                f"{where}: ports below 1024 need privileges this process lacks. Set {port} "
                f"to 1024 or above{instead}",
                field=self.port_setting,
            )
        if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
            return ConfigError(
                f"{where}: {self.host} is not an address of this machine "
                f"({exc.strerror or exc}). Set {host} to one of its addresses, such as "
                f"127.0.0.1{instead}",
                field=self.host_setting,
            )
        return ConfigError(
            f"{where}: {exc.strerror or exc}. Check {host} and {port}{instead}",
            field=self.port_setting,
        )
