"""The browser's guarded proxy on its own, spoken to the way Chromium speaks to it.

Plain HTTP arrives in absolute form, everything else as CONNECT. Each request is judged
like a plain fetch (literals in any spelling, internal names, every DNS answer); a name is
resolved once and the proxy connects to the address it checked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from agent.web.proxy import REFUSED_HEADER, GuardedProxy, split_authority
from agent.web.ssrf import AddressPolicy, Guard
from tests.fakes.web import FakeDNS, FakeSite


@pytest.fixture
async def site() -> AsyncIterator[FakeSite]:
    fake = await FakeSite().start()
    fake.page("/hello", "<p>hello</p>")
    yield fake
    await fake.stop()


def guard(dns: FakeDNS | None = None, allow: tuple[str, ...] = ("allowed.test",)) -> Guard:
    return Guard(AddressPolicy(allow), lookup=dns or FakeDNS({"allowed.test": ["127.0.0.1"]}))


async def ask(proxy: GuardedProxy, head: str) -> tuple[str, bytes]:
    """Send one request head; the status line and everything the proxy answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(head.encode())
        await writer.drain()
        async with asyncio.timeout(10):
            answer = await reader.read()
    finally:
        writer.close()
    return answer.split(b"\r\n", 1)[0].decode(), answer


async def test_plain_http_reaches_an_allowed_host_as_an_origin_request(site: FakeSite) -> None:
    async with GuardedProxy(guard(), max_bytes=1_000_000) as proxy:
        status, answer = await ask(
            proxy,
            f"GET http://allowed.test:{site.port}/hello?x=1 HTTP/1.1\r\n"
            f"Host: allowed.test:{site.port}\r\nProxy-Connection: keep-alive\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\n\r\n",
        )
    assert status == "HTTP/1.1 200 OK"
    assert answer.endswith(b"<p>hello</p>")
    assert site.requests == ["/hello?x=1"]
    headers = {k.lower(): v for k, v in site.headers[0].items()}
    assert headers["connection"] == "close"
    assert "proxy-authorization" not in headers and "proxy-connection" not in headers
    assert proxy.traffic.bytes > len(answer)  # both directions are counted


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        ("CONNECT 127.0.0.1:{port} HTTP/1.1", "127.0.0.1 is a loopback address"),
        ("CONNECT [::1]:{port} HTTP/1.1", "::1 is a loopback address"),
        ("CONNECT localhost:{port} HTTP/1.1", "localhost is an internal host name"),
        ("CONNECT 169.254.169.254:80 HTTP/1.1", "link-local"),
        ("GET http://2130706433:{port}/ HTTP/1.1", "(127.0.0.1) is a loopback address"),
        ("GET http://0x7f000001:{port}/ HTTP/1.1", "(127.0.0.1) is a loopback address"),
        ("GET http://[::ffff:7f00:1]:{port}/ HTTP/1.1", "loopback"),
        ("GET http://intranet.test:{port}/ HTTP/1.1", "intranet.test (127.0.0.1) is a loopback"),
        ("GET http://mixed.test:{port}/ HTTP/1.1", "mixed.test (10.1.2.3) is a private network"),
        ("GET http://metadata.google.internal/ HTTP/1.1", "internal host name"),
        ("GET http://user:pw@allowed.test:{port}/ HTTP/1.1", "credentials"),
    ],
)
async def test_internal_targets_are_refused_without_a_connection(
    site: FakeSite, head: str, reason: str
) -> None:
    dns = FakeDNS(
        {
            "allowed.test": ["127.0.0.1"],
            "intranet.test": ["127.0.0.1"],
            "mixed.test": ["93.184.216.34", "10.1.2.3"],
        }
    )
    async with GuardedProxy(guard(dns), max_bytes=1_000_000) as proxy:
        status, answer = await ask(proxy, head.format(port=site.port) + "\r\nHost: x\r\n\r\n")
    assert status == "HTTP/1.1 403 Forbidden"
    assert f"{REFUSED_HEADER}: 1".encode() in answer
    assert reason.encode() in answer
    assert proxy.traffic.connections == 0
    assert site.requests == []


async def test_connect_tunnels_to_an_allowed_host(site: FakeSite) -> None:
    async with GuardedProxy(guard(), max_bytes=1_000_000) as proxy:
        status, answer = await ask(
            proxy,
            f"CONNECT allowed.test:{site.port} HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
            f"GET /hello HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n",
        )
    assert status == "HTTP/1.1 200 Connection established"
    assert answer.endswith(b"<p>hello</p>")
    assert site.requests == ["/hello"]


async def test_a_name_is_resolved_once_and_the_checked_address_is_used(site: FakeSite) -> None:
    """DNS rebinding: the second answer (private) would be used by a resolver asked twice."""
    dns = FakeDNS({"rebind.test": [["127.0.0.1"], ["10.9.9.9"]]})
    policy_allows_the_site = ("127.0.0.1/32",)
    async with GuardedProxy(guard(dns, policy_allows_the_site), max_bytes=1_000_000) as proxy:
        status, _ = await ask(
            proxy, f"GET http://rebind.test:{site.port}/hello HTTP/1.1\r\nHost: r\r\n\r\n"
        )
    assert status == "HTTP/1.1 200 OK"
    assert dns.lookups == ["rebind.test"]


async def test_the_byte_budget_cuts_the_transfer_and_refuses_more(site: FakeSite) -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            while True:
                await response.write(b"x" * 8192)
        return response

    site.handle("/endless", endless)
    async with GuardedProxy(guard(), max_bytes=200_000) as proxy:
        _, answer = await ask(
            proxy, f"GET http://allowed.test:{site.port}/endless HTTP/1.1\r\nHost: a\r\n\r\n"
        )
        assert 100_000 < len(answer) <= 200_000
        assert proxy.cut.is_set()
        status, _ = await ask(
            proxy, f"GET http://allowed.test:{site.port}/hello HTTP/1.1\r\nHost: a\r\n\r\n"
        )
    assert status == "HTTP/1.1 403 Forbidden"
    assert site.requests == ["/endless"]


async def test_a_client_holds_at_most_the_proxys_connections_at_once() -> None:
    """A script (or a page) opening connection after connection gets cut off past the cap,
    rather than holding the gateway's file descriptors."""
    async with GuardedProxy(guard(), max_bytes=1_000_000, max_connections=2) as proxy:
        held = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # closed at once, unanswered
        writer.close()
        for _, held_writer in held:
            held_writer.close()


def test_connect_targets_are_split_into_host_and_port() -> None:
    assert split_authority("example.org:8443") == ("example.org", 8443)
    assert split_authority("[::1]:443") == ("[::1]", 443)
    assert split_authority("example.org") == ("example.org", 443)
    assert split_authority("::1") == ("::1", 443)
