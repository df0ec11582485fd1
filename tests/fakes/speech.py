"""A fake OpenAI-compatible speech server: ``/v1/audio/transcriptions`` and ``/v1/audio/speech``.

The gateway reaches it through the real openai SDK (``[voice] base_url``). A transcription
answers with the text scripted for the uploaded bytes (or ``transcript``), and, when asked
for ``verbose_json``, the recording's length (``seconds``) as OpenAI and Groq report it.
Speech answers with a small Ogg file. Every request is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

# An Ogg page header (version 0, granule 48,000 = one second of Opus) and a few bytes.
SPOKEN = b"OggS\x00\x04" + (48_000).to_bytes(8, "little") + b"\x00" * 12 + b"spoken reply"


@dataclass
class Heard:
    """One call to the fake: which endpoint, the form or JSON fields, the uploaded file."""

    endpoint: str
    fields: dict[str, Any]
    upload: bytes = b""


@dataclass
class FakeSpeech:
    transcript: str = "transcribed words"
    seconds: float = 4.0
    scripts: dict[bytes, tuple[str, float]] = field(default_factory=dict)  # by file content
    calls: list[Heard] = field(default_factory=list)
    speaks: bool = True  # False: a server without /audio/speech (a whisper-only one): 404
    port: int = 0
    _runner: web.AppRunner | None = None

    async def start(self) -> FakeSpeech:
        app = web.Application(client_max_size=50 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def called(self, endpoint: str) -> list[Heard]:
        return [c for c in self.calls if c.endpoint == endpoint]

    async def _transcribe(self, request: web.Request) -> web.Response:
        fields: dict[str, Any] = {}
        upload = b""
        reader = await request.multipart()
        async for part in reader:
            if part.filename is not None:  # type: ignore[union-attr]
                upload = bytes(await part.read())  # type: ignore[union-attr]
            else:
                fields[part.name or ""] = await part.text()  # type: ignore[union-attr]
        self.calls.append(Heard("transcriptions", fields, upload))
        text, seconds = self.scripts.get(upload, (self.transcript, self.seconds))
        if fields.get("response_format") == "verbose_json":
            return web.json_response({"text": text, "duration": seconds, "language": "english"})
        return web.json_response({"text": text})

    async def _speak(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append(Heard("speech", body))
        if not self.speaks:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.Response(body=SPOKEN, content_type="audio/ogg")
