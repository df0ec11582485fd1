"""A local web site and a fake DNS for the web tools' tests.

``FakeSite`` is an aiohttp server on 127.0.0.1 (or ``::1``; port 0, in the test's loop) whose pages
tests define; it records every request, so a test can prove a blocked URL never reached
it. ``FakeDNS`` is the guard's lookup seam: names map to scripted answers, one per lookup
(the last repeats), which is how a test plays DNS rebinding.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class FakeSite:
    def __init__(self, bind: str = "127.0.0.1") -> None:
        self.bind = bind  # "::1" for a site on the IPv6 loopback
        self.requests: list[str] = []  # path and query of every request, in order
        self.hosts: list[str] = []  # Host header of every request
        self.headers: list[dict[str, str]] = []  # headers of every request
        self._routes: dict[str, Handler] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> FakeSite:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def url(self, path: str = "/", host: str | None = None) -> str:
        host = host or (f"[{self.bind}]" if ":" in self.bind else self.bind)
        return f"http://{host}:{self.port}{path}"

    # -- defining pages -------------------------------------------------------------------

    def handle(self, path: str, handler: Handler) -> None:
        self._routes[path] = handler

    def page(
        self,
        path: str,
        body: str | bytes,
        content_type: str | None = "text/html; charset=utf-8",
        *,
        status: int = 200,
    ) -> None:
        """Serve ``body``; without a content type aiohttp labels it application/octet-stream."""
        data = body.encode() if isinstance(body, str) else body

        async def serve(request: web.Request) -> web.StreamResponse:
            headers = {"Content-Type": content_type} if content_type else {}
            return web.Response(body=data, status=status, headers=headers)

        self.handle(path, serve)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        async def serve(request: web.Request) -> web.StreamResponse:
            return web.Response(status=status, headers={"Location": location})

        self.handle(path, serve)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request.path_qs)
        self.hosts.append(request.headers.get("Host", ""))
        self.headers.append(dict(request.headers))
        handler = self._routes.get(request.path)
        if handler is None:
            return web.Response(status=404, text="not found")
        return await handler(request)


class FakeDNS:
    """The guard's lookup: ``{"name": ["1.2.3.4"]}`` or a list of answers, one per lookup."""

    def __init__(self, records: dict[str, Sequence[str] | Sequence[Sequence[str]]]) -> None:
        self._answers: dict[str, list[list[str]]] = {}
        for name, answer in records.items():
            if answer and not isinstance(answer[0], str):
                self._answers[name] = [list(a) for a in answer]
            else:
                self._answers[name] = [[str(a) for a in answer]]
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        answers = self._answers.get(host)
        if answers is None:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return answers.pop(0) if len(answers) > 1 else answers[0]
