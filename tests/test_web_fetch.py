"""Fetching and reading pages: readable markdown with links, text and JSON, binaries refused,
size and time capped."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from agent.web.extract import page_text
from agent.web.fetch import FetchError, FetchLimits, PageFetcher, UnsupportedContent
from agent.web.ssrf import AddressPolicy, Guard
from tests.fakes.web import FakeDNS, FakeSite

ARTICLE = """<!doctype html>
<html><head><title>Growing  Tomatoes | Garden Guide</title>
<style>body { color: red; } .SECRET_STYLE { display: none }</style>
<script>var token = "SCRIPT_TEXT";</script></head>
<body>
<nav><a href="/home">Home</a> | <a href="/about">About us</a></nav>
<article>
<h1>Growing tomatoes</h1>
<p>Tomatoes need <b>full sun</b> and regular watering. See the <a href="/guides/soil">soil
guide</a> and the <a href="https://seeds.example.org/catalogue">seed catalogue</a>.</p>
<h2>Steps</h2>
<ul><li>Plant after the last frost</li><li>Stake the plants early</li></ul>
<p>Water at the base of the plant in the morning so the leaves dry before evening.</p>
</article>
<footer>Copyright 2026 Garden Guide</footer>
<script>document.write("MORE_SCRIPT_TEXT")</script>
</body></html>"""


def fetcher(**limits: float) -> PageFetcher:
    guard = Guard(AddressPolicy(("allowed.test",)), lookup=FakeDNS({"allowed.test": ["127.0.0.1"]}))
    return PageFetcher(guard, FetchLimits(**limits))  # type: ignore[arg-type]


async def read(site: FakeSite, path: str, **limits: float) -> str:
    page = await fetcher(**limits).fetch(site.url(path, host="allowed.test"))
    return (await asyncio.to_thread(page_text, page)).text


async def test_html_becomes_markdown_with_absolute_links_and_no_scripts(site: FakeSite) -> None:
    site.page("/posts/tomatoes", ARTICLE)
    page = await fetcher().fetch(site.url("/posts/tomatoes", host="allowed.test"))
    extracted = await asyncio.to_thread(page_text, page)
    base = f"http://allowed.test:{site.port}"
    assert extracted.title == "Growing Tomatoes | Garden Guide"
    assert "# Growing tomatoes" in extracted.text
    assert "**full sun**" in extracted.text
    assert f"[soil guide]({base}/guides/soil)" in " ".join(extracted.text.split())
    assert "[seed catalogue](https://seeds.example.org/catalogue)" in extracted.text
    assert "- Plant after the last frost" in extracted.text
    for dropped in ("SCRIPT_TEXT", "color: red", "SECRET_STYLE"):
        assert dropped not in extracted.text


async def test_a_tiny_page_still_gives_its_text(site: FakeSite) -> None:
    site.page("/tiny", "<html><body><p>Hello <a href='/x'>there</a></p></body></html>")
    assert "Hello" in await read(site, "/tiny")


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("text/plain; charset=utf-8", "plain words\nsecond line", "plain words\nsecond line"),
        ("text/markdown", "# Title\n\n[link](https://x.example)", "[link](https://x.example)"),
        ("application/json", '{"name":"tomato","days":75}', '"name": "tomato"'),
        ("application/ld+json", '{"a":1}', '"a": 1'),
        ("text/plain; charset=iso-8859-1", "caf\xe9".encode("latin-1"), "café"),
        (
            None,
            "<!doctype html><html><body><p>unlabelled page</p></body></html>",
            "unlabelled page",
        ),
    ],
)
async def test_text_json_and_unlabelled_pages_are_read(
    site: FakeSite, content_type: str | None, body: str | bytes, expected: str
) -> None:
    site.page("/doc", body, content_type)
    assert expected in await read(site, "/doc")


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("application/pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "PDF"),
        ("image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "PNG"),
        (None, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "PNG"),
        ("application/octet-stream", b"\x00\x01\x02\x03binary", "binary"),
        ("text/html", b"PK\x03\x04\x14\x00\x06\x00", "ZIP"),  # mislabelled archive
        ("application/zip", b"PK\x03\x04\x14\x00\x06\x00", "ZIP"),
        ("video/mp4", b"....ftypisom", "video/mp4"),
    ],
)
async def test_binaries_are_refused_with_a_clear_message(
    site: FakeSite, content_type: str | None, body: bytes, message: str
) -> None:
    site.page("/file", body, content_type)
    with pytest.raises(UnsupportedContent, match=message):
        await fetcher().fetch(site.url("/file", host="allowed.test"))


async def test_http_errors_are_reported(site: FakeSite) -> None:
    with pytest.raises(FetchError, match="HTTP 404 Not Found"):
        await fetcher().fetch(site.url("/missing", host="allowed.test"))


async def test_size_cap_stops_reading_a_huge_body(site: FakeSite) -> None:
    chunk = b"<p>" + b"a" * 65_530 + b"</p>"
    total = 1024 * len(chunk)  # 64 MiB if nobody stops
    sent = 0
    stopped = asyncio.Event()

    async def huge(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        try:
            for _ in range(1024):
                await response.write(chunk)
                sent += len(chunk)
        except (ConnectionError, RuntimeError):
            stopped.set()
        return response

    site.handle("/huge", huge)
    page = await fetcher(max_bytes=100_000).fetch(site.url("/huge", host="allowed.test"))
    assert page.truncated
    assert len(page.body) == 100_000
    await asyncio.wait_for(stopped.wait(), 10)  # the client hung up mid-body
    assert sent < total


async def test_time_cap_ends_a_stalled_fetch(site: FakeSite) -> None:
    release = asyncio.Event()

    async def stall(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        await response.write(b"<html><body><p>first words")
        await release.wait()
        return response

    site.handle("/slow", stall)
    started = time.monotonic()
    try:
        with pytest.raises(FetchError, match=r"timed out after 0\.3s"):
            await fetcher(timeout=0.3).fetch(site.url("/slow", host="allowed.test"))
    finally:
        release.set()
    assert time.monotonic() - started < 3


async def test_time_cap_covers_a_server_that_never_answers(site: FakeSite) -> None:
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="late")

    site.handle("/hang", hang)
    try:
        with pytest.raises(FetchError, match="timed out"):
            await fetcher(timeout=0.3).fetch(site.url("/hang", host="allowed.test"))
    finally:
        release.set()
