"""Which network addresses ``web_fetch`` may reach, checked before and at connect time.

Three layers, because each one alone has a known bypass:

1. :meth:`Guard.vet_url` checks the URL: http(s) only, no credentials, no internal names,
   and an IP literal in any spelling a resolver accepts (``2130706433``, ``0x7f000001``,
   ``0177.0.0.1``, ``127.1``, ``[::ffff:127.0.0.1]``) is normalised and judged. Names are
   resolved and every answer judged, so the usual case fails clearly before a socket exists.
2. The fetch's aiohttp resolver (:mod:`agent.web.connect`) judges the addresses a name
   resolves to *at connect time*, and aiohttp connects to exactly those. A name that
   answers public to the first lookup and private to the second (DNS rebinding) is
   stopped here.
3. The same connector's socket factory judges the final address of every connection
   attempt (aiohttp skips the resolver for IP literals) and refuses it before ``connect``.

Redirects pass all three again, because the fetcher follows them by hand.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence

from yarl import URL

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host name and port -> the IP addresses (as text) it resolves to; tests inject a fake DNS.
Lookup = Callable[[str, int], Awaitable[Sequence[str]]]

ALLOWED_SCHEMES = frozenset({"http", "https"})
# Internal by definition (RFC 6761 localhost, RFC 6762 .local, RFC 8375 .home.arpa, ICANN's
# .internal) or a cloud metadata service name; refused before any DNS lookup.
BLOCKED_NAMES = frozenset(
    {"localhost", "metadata", "metadata.google.internal", "metadata.goog", "instance-data"}
)
BLOCKED_SUFFIXES = (".localhost", ".local", ".localdomain", ".internal", ".home.arpa")

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
# Only hosts made of these characters can be a legacy numeric IPv4 (inet_aton would also
# accept "127.0.0.1 anything", so the check must come first).
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+", re.IGNORECASE)


class BlockedTarget(Exception):
    """The URL or one of its addresses is not a public web address; nothing was sent to it."""


class HostOutOfBounds(BlockedTarget):
    """The host is not one this turn may reach (its skills declared others); nothing sent."""


def normalise_host(host: str | None) -> str:
    return (host or "").strip().strip("[]").rstrip(".").lower()


def parse_ip(host: str) -> IPAddress | None:
    """The address a host string denotes in any spelling a resolver accepts; None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(host):
        try:  # the C library's inet_aton: 127.1, 0x7f000001, 2130706433, 0177.0.0.1
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, compatible, SIIT, NAT64, 6to4)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    if ip in _IPV4_TRANSLATED or ip in _NAT64:
        return low32
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # not :: or ::1, judged as themselves
        return low32
    return None


def blocked_reason(ip: IPAddress) -> str | None:
    """Why an address is not on the public internet; None when it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        decided, reason = _ipv6_verdict(ip)
        if decided:
            return reason
    if ip.is_unspecified:
        return "the unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (where cloud metadata services live)"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a carrier-grade NAT address (100.64.0.0/10)"
    if ip.is_private:
        return "a private network address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        return "not a public address"
    return None


def _ipv6_verdict(ip: ipaddress.IPv6Address) -> tuple[bool, str | None]:
    """IPv6-only rules; (False, None) leaves the address to the common ones."""
    inner = embedded_ipv4(ip)
    if inner is not None:
        reason = blocked_reason(inner)
        if reason is not None:
            return True, f"{reason} ({inner} inside the IPv6 address)"
        if ip.sixtofour is None:  # mapped, compatible, NAT64: it reaches that public IPv4
            return True, None
    if ip in _NAT64_LOCAL:
        return True, "a local-use NAT64 address"
    if ip in _UNIQUE_LOCAL:
        return True, "a unique-local IPv6 address"
    if ip.is_site_local:
        return True, "a site-local IPv6 address"
    return False, None


class AddressPolicy:
    """Public addresses only, except what the operator listed in ``tools.web.allow_private_hosts``.

    An entry is a host name (that name may resolve anywhere) or an IP address or network
    (that address may be reached under any name).
    """

    def __init__(self, allow_private_hosts: Iterable[str] = ()) -> None:
        self._names: set[str] = set()
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for raw in allow_private_hosts:
            entry = normalise_host(raw)
            if not entry:
                continue
            try:
                self._networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self._names.add(entry)

    def name_allowed(self, host: str) -> bool:
        return normalise_host(host) in self._names

    def name_refusal(self, host: str) -> str | None:
        name = normalise_host(host)
        if name in self._names:
            return None
        if name in BLOCKED_NAMES or name.endswith(BLOCKED_SUFFIXES):
            return "an internal host name"
        return None

    def address_refusal(self, ip: IPAddress) -> str | None:
        if any(ip in network for network in self._networks):
            return None
        return blocked_reason(ip)


async def system_lookup(host: str, port: int) -> list[str]:
    """The operating system's resolver, off the event loop."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class Guard:
    """The address policy plus the DNS lookup whose answers it judges; ``confine`` may refuse
    further host names (a turn that loaded a skill reaches only the hosts it declared)."""

    def __init__(
        self,
        policy: AddressPolicy | None = None,
        *,
        lookup: Lookup | None = None,
        confine: Callable[[str], str | None] | None = None,
    ):
        self.policy = policy or AddressPolicy()
        self._lookup = lookup or system_lookup
        self._confine = confine

    def confined(self, refusal: Callable[[str], str | None]) -> Guard:
        """This guard, refusing also every host for which ``refusal`` gives a reason."""
        return Guard(self.policy, lookup=self._lookup, confine=refusal)

    def check_bounds(self, host: str) -> None:
        """Raise :class:`HostOutOfBounds` for a host this guard is confined away from."""
        if self._confine is not None and (reason := self._confine(host)) is not None:
            raise HostOutOfBounds(reason)

    def refuse(self, host: str, reason: str) -> BlockedTarget:
        log.warning("web_fetch refused %s: %s", host, reason)
        return BlockedTarget(f"{host} is {reason}")

    def check_address(self, ip: IPAddress, host: str) -> None:
        reason = self.policy.address_refusal(ip)
        if reason is not None:
            shown = host if host == str(ip) else f"{host} ({ip})"
            raise self.refuse(shown, reason)

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address of a name; OSError when it has none."""
        answers = await self._lookup(host, port)
        addresses = [ipaddress.ip_address(a) for a in answers]
        if not addresses:
            raise OSError(f"{host} has no address")
        return addresses

    async def vet_url(self, url: URL) -> None:
        """Refuse a URL that is not http(s) to a public host; resolves names to check them."""
        if url.scheme not in ALLOWED_SCHEMES:
            scheme = f"{url.scheme}:" if url.scheme else "a relative URL"
            raise BlockedTarget(f"only http and https URLs can be fetched, not {scheme}")
        if url.user is not None or url.password is not None:
            raise BlockedTarget("URLs with a user name or password are not fetched")
        host = normalise_host(url.raw_host)
        if not host:
            raise BlockedTarget("the URL has no host")
        self.check_bounds(host)
        literal = parse_ip(normalise_host(url.host))
        if literal is not None:
            self.check_address(literal, host)
            return
        refusal = self.policy.name_refusal(host)
        if refusal is not None:
            raise self.refuse(host, refusal)
        if self.policy.name_allowed(host):
            return
        for ip in await self.resolve(host, url.port or 0):
            self.check_address(ip, host)
