"""web_fetch, plain vs rendered: how much a real browser costs per page.

A local site (same process) serves a static article and a single-page app whose text a
script inserts after fetching it as JSON. ``web_fetch`` reads them through the real tool
(guard, fetcher, extraction; no condensing), with the browser the gateway would use:

    python -m bench.web [--runs 20]

Measured: the browser's cold start (first page), then the median and p90 of each way of
reading, and the browser's resident memory afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from agent.tools.base import ToolContext, TurnState
from agent.tools.web import WebFetch, web_browser, web_tools
from agent.workspace import Workspace
from gateway.config.settings import WebToolSettings
from gateway.core.messages import ChatRef, OutboundMessage
from gateway.core.principal import Principal

ARTICLE = "<html><head><title>Article</title></head><body><article><h1>Tomatoes</h1>{}</article></body></html>"
PARAGRAPH = "<p>Paragraph {n}: tomatoes ripen in about 75 days in warm soil with steady water.</p>"
APP = """<html><head><title>App</title></head><body><div id="root"></div><script>
fetch('/api/text').then(r => r.json()).then(d => {
  document.getElementById('root').innerHTML = '<article>' + d.html + '</article>';
});
</script></body></html>"""


async def serve() -> tuple[web.AppRunner, int]:
    article = ARTICLE.format("".join(PARAGRAPH.format(n=n) for n in range(40)))
    paragraphs = "".join(PARAGRAPH.format(n=n) for n in range(40))

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=article, content_type="text/html")

    async def app(request: web.Request) -> web.Response:
        return web.Response(text=APP, content_type="text/html")

    async def api(request: web.Request) -> web.Response:
        return web.json_response({"html": paragraphs})

    application = web.Application()
    application.router.add_get("/article", page)
    application.router.add_get("/app", app)
    application.router.add_get("/api/text", api)
    runner = web.AppRunner(application, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def context(root: Path) -> ToolContext:
    async def send(message: OutboundMessage) -> None:
        return None

    return ToolContext(
        turn_id="bench",
        call_id="c1",
        session_key="bench:1",
        chat=ChatRef("bench", "1"),
        principal=Principal("bench", "u1"),
        workspace=Workspace(root),
        send=send,
        state=TurnState(),
    )


async def timed(tool: WebFetch, ctx: ToolContext, runs: int, **args: Any) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = await tool.run(args, ctx)
        times.append(time.perf_counter() - start)
        assert "Paragraph 39" in result.content, result.content[:500]
    return times


def row(label: str, times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"| {label} | {statistics.median(times) * 1000:.0f} ms | {p90 * 1000:.0f} ms |"


async def main(runs: int) -> None:
    runner, port = await serve()
    settings = WebToolSettings(allow_private_hosts=["127.0.0.1"])
    browser = web_browser(settings)
    assert browser is not None
    [_, fetch] = web_tools(settings, browser=browser)
    assert isinstance(fetch, WebFetch)
    [_, plain_only] = web_tools(settings.model_copy(update={"browser": "off"}))
    assert isinstance(plain_only, WebFetch)
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        ctx = context(Path(tmp))
        async with browser:
            start = time.perf_counter()
            await fetch.run({"url": f"{base}/article", "render": True}, ctx)
            cold = time.perf_counter() - start
            lines = [
                "| way of reading | p50 | p90 |",
                "| --- | --- | --- |",
                row(
                    "plain fetch, static article",
                    await timed(plain_only, ctx, runs, url=f"{base}/article"),
                ),
                row(
                    "`auto`, static article (plain, enough text)",
                    await timed(fetch, ctx, runs, url=f"{base}/article"),
                ),
                row(
                    "`render: true`, static article",
                    await timed(fetch, ctx, runs, url=f"{base}/article", render=True),
                ),
                row(
                    "`auto`, script-built page (plain, then rendered)",
                    await timed(fetch, ctx, runs, url=f"{base}/app"),
                ),
                row(
                    "`screenshot: true`, script-built page",
                    await timed(fetch, ctx, runs, url=f"{base}/app", screenshot=True),
                ),
            ]
            memory = await browser.memory_mb()
    await runner.cleanup()
    print(f"browser cold start + first rendered page: {cold * 1000:.0f} ms")
    print("\n".join(lines))
    if memory is not None:
        print(f"browser resident memory after {3 * runs + 1} rendered pages: {memory:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
