"""web_fetch reaches public addresses only: every spelling of an internal address, names that
resolve inward, DNS rebinding and redirects are refused before anything is sent to them."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator

import aiohttp
import pytest

from agent.web.connect import guarded_connector
from agent.web.fetch import FetchError, FetchLimits, PageFetcher
from agent.web.ssrf import AddressPolicy, BlockedTarget, Guard, blocked_reason, parse_ip
from tests.fakes.web import FakeDNS, FakeSite

PUBLIC = "93.184.216.34"


@pytest.fixture
async def site() -> AsyncIterator[FakeSite]:
    fake = await FakeSite().start()
    fake.page("/", "<html><body><p>internal admin page</p></body></html>")
    fake.page("/secret", "<html><body><p>internal secret</p></body></html>")
    yield fake
    await fake.stop()


def fetcher(dns: FakeDNS | None = None, allow: tuple[str, ...] = ()) -> PageFetcher:
    guard = Guard(AddressPolicy(allow), lookup=dns or FakeDNS({}))
    return PageFetcher(guard, FetchLimits(timeout=5))


# Every form reaches the local site's port if it is not stopped; {port} is filled in.
LOOPBACK_FORMS = [
    "http://127.0.0.1:{port}/",
    "https://127.0.0.1:{port}/",
    "http://127.0.0.1.:{port}/",
    "http://2130706433:{port}/",  # decimal
    "http://0x7f000001:{port}/",  # hex
    "http://0x7f.0.0.1:{port}/",  # hex octet
    "http://0177.0.0.1:{port}/",  # octal
    "http://017700000001:{port}/",  # octal, one number
    "http://127.1:{port}/",  # short form
    "http://127.0.1:{port}/",
    "http://１２７.０.０.１:{port}/",  # fullwidth digits (IDNA folds them)
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",  # IPv4-mapped
    "http://[::ffff:7f00:1]:{port}/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]:{port}/",
    "http://[::127.0.0.1]:{port}/",  # IPv4-compatible
    "http://[::ffff:0:127.0.0.1]:{port}/",  # SIIT-translated
    "http://[2002:7f00:1::]:{port}/",  # 6to4 around 127.0.0.1
    "http://[64:ff9b::7f00:1]:{port}/",  # NAT64 around 127.0.0.1
    "http://0.0.0.0:{port}/",
    "http://0:{port}/",
    "http://[::]:{port}/",
    "http://localhost:{port}/",
    "http://LOCALHOST.:{port}/",
    "http://app.localhost:{port}/",
]

OTHER_INTERNAL = [
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://[::ffff:169.254.169.254]/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata/computeMetadata/v1/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://224.0.0.1/",  # multicast
    "http://[ff02::1]/",
    "http://[fe80::1]/",  # IPv6 link-local
    "http://[fe80::1%25eth0]/",
    "http://[fc00::1]/",  # unique-local
    "http://[fd12:3456::1]/",
    "http://[fec0::1]/",  # site-local
    "http://[2002:a00:1::]/",  # 6to4 around 10.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 around 169.254.169.254
    "http://printer.local/",
    "http://router.home.arpa/",
    "http://192.0.2.1/",  # documentation range
    "http://255.255.255.255/",
]

SCHEMES = [
    "file:///etc/passwd",
    "gopher://127.0.0.1:{port}/_GET%20/",
    "ftp://127.0.0.1:{port}/",
    "dict://127.0.0.1:{port}/",
    "data:text/html,<p>hi</p>",
    "/relative/path",
    "http://user:password@example.com/",
]


@pytest.mark.parametrize("template", LOOPBACK_FORMS + OTHER_INTERNAL + SCHEMES)
async def test_internal_targets_are_refused_before_any_connection(
    template: str, site: FakeSite
) -> None:
    dns = FakeDNS({})
    with pytest.raises(BlockedTarget):
        await fetcher(dns).fetch(template.format(port=site.port))
    assert site.requests == []  # nothing reached the local server
    assert dns.lookups == []  # literals and internal names need no lookup to be refused


@pytest.mark.parametrize(
    "answer",
    [["127.0.0.1"], ["::1"], ["10.1.2.3"], ["169.254.169.254"], [PUBLIC, "127.0.0.1"]],
    ids=["loopback", "v6-loopback", "private", "metadata", "one-of-several"],
)
async def test_a_public_looking_name_that_resolves_inward_is_refused(
    answer: list[str], site: FakeSite
) -> None:
    dns = FakeDNS({"news.example.com": answer})
    with pytest.raises(BlockedTarget, match=r"news\.example\.com"):
        await fetcher(dns).fetch(site.url("/secret", host="news.example.com"))
    assert site.requests == []


async def test_dns_rebinding_is_caught_at_connect_time(site: FakeSite) -> None:
    # Public when the URL is checked, loopback when aiohttp resolves to connect.
    dns = FakeDNS({"rebind.example.com": [[PUBLIC], ["127.0.0.1"]]})
    with pytest.raises(BlockedTarget, match="loopback"):
        await fetcher(dns).fetch(site.url("/secret", host="rebind.example.com"))
    assert dns.lookups == ["rebind.example.com", "rebind.example.com"]
    assert site.requests == []


async def test_connector_refuses_internal_sockets_even_without_the_url_check(
    site: FakeSite,
) -> None:
    """The connect-time layers stand on their own (aiohttp skips the resolver for literals)."""
    guard = Guard(AddressPolicy(), lookup=FakeDNS({"inward.example.com": ["127.0.0.1"]}))
    async with aiohttp.ClientSession(connector=guarded_connector(guard)) as session:
        with pytest.raises(BlockedTarget, match="loopback"):
            await session.get(site.url("/secret"))
        with pytest.raises(BlockedTarget, match="loopback"):
            await session.get(site.url("/secret", host="inward.example.com"))
    assert site.requests == []


REDIRECT_TARGETS = [
    "http://127.0.0.1:{port}/secret",
    "http://[::ffff:127.0.0.1]:{port}/secret",
    "http://2130706433:{port}/secret",
    "http://localhost:{port}/secret",
    "http://inward.example.com:{port}/secret",  # resolves to 127.0.0.1
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:{port}/_x",
]


@pytest.mark.parametrize("target", REDIRECT_TARGETS)
@pytest.mark.parametrize("status", [302, 307])
async def test_redirects_to_internal_addresses_are_refused(
    target: str, status: int, site: FakeSite
) -> None:
    """allowed.test is the operator's opt-in internal host; where it redirects is not."""
    site.redirect("/go", target.format(port=site.port), status)
    dns = FakeDNS({"allowed.test": ["127.0.0.1"], "inward.example.com": ["127.0.0.1"]})
    with pytest.raises(BlockedTarget):
        await fetcher(dns, allow=("allowed.test",)).fetch(site.url("/go", host="allowed.test"))
    assert site.requests == ["/go"]  # the redirect was read, its target never requested


async def test_allowlisted_host_is_fetched_and_redirects_within_it_are_followed(
    site: FakeSite,
) -> None:
    site.redirect("/old", "/new")
    site.redirect("/new", f"http://allowed.test:{site.port}/")
    dns = FakeDNS({"allowed.test": ["127.0.0.1"]})
    page = await fetcher(dns, allow=("allowed.test",)).fetch(site.url("/old", host="allowed.test"))
    assert page.url == f"http://allowed.test:{site.port}/"
    assert b"internal admin page" in page.body
    assert site.requests == ["/old", "/new", "/"]


async def test_allowlisted_address_or_network_opens_that_address_only(site: FakeSite) -> None:
    page = await fetcher(allow=("127.0.0.0/8",)).fetch(site.url("/"))
    assert b"internal admin page" in page.body
    with pytest.raises(BlockedTarget):
        await fetcher(allow=("127.0.0.1",)).fetch("http://10.0.0.1/")


async def test_too_many_redirects_stop(site: FakeSite) -> None:
    for n in range(10):
        site.redirect(f"/r{n}", f"/r{n + 1}")
    guard = Guard(AddressPolicy(("127.0.0.1",)), lookup=FakeDNS({}))
    with pytest.raises(FetchError, match="after 5 redirects"):
        await PageFetcher(guard, FetchLimits(max_redirects=5)).fetch(site.url("/r0"))
    assert len(site.requests) == 6


async def test_an_unknown_name_is_a_clear_fetch_error() -> None:
    with pytest.raises(FetchError, match=r"could not resolve nowhere\.example"):
        await fetcher(FakeDNS({})).fetch("http://nowhere.example/")


@pytest.mark.parametrize(
    ("spelling", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("0", "0.0.0.0"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
    ],
)
def test_every_numeric_spelling_is_normalised(spelling: str, address: str) -> None:
    assert parse_ip(spelling) == ipaddress.ip_address(address)


@pytest.mark.parametrize("name", ["example.com", "cafe.be", "127.0.0.1 extra", "0x7g.1", ""])
def test_names_are_not_mistaken_for_addresses(name: str) -> None:
    assert parse_ip(name) is None


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"],
)
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address)) is None
