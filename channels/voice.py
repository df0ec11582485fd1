"""Voice notes to text, for every channel: one OpenAI-compatible ``/audio/transcriptions``.

A channel that stored a voice note (or an audio clip) as an attachment hands it to
:func:`transcribed`, which returns the attachment with a note the model reads (the
transcript, or why there is none) and the transcript itself, which becomes the message's
text when the person sent nothing else. Any server with that endpoint works: OpenAI, Groq,
a local whisper server.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from gateway.core.messages import Attachment

log = logging.getLogger(__name__)


class TranscriptionError(Exception):
    """The transcription provider failed; the message says how."""


class Transcriber:
    """Speech to text through any OpenAI-compatible ``/audio/transcriptions`` endpoint.

    The openai SDK (about a second of imports) is loaded only when transcription is
    configured, so a plain Telegram bot starts without it."""

    def __init__(self, *, base_url: str | None, api_key: str | None, model: str) -> None:
        import openai  # noqa: PLC0415 - only with transcription on

        self.model = model
        self._error: type[Exception] = openai.OpenAIError
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", max_retries=1, timeout=120
        )

    async def transcribe(self, path: Path) -> str:
        try:
            result = await self._client.audio.transcriptions.create(model=self.model, file=path)
        except self._error as exc:
            raise TranscriptionError(str(exc)) from exc
        return str(getattr(result, "text", result)).strip()

    async def aclose(self) -> None:
        await self._client.close()


async def transcribed(
    attachment: Attachment, transcriber: Transcriber | None
) -> tuple[Attachment, str]:
    """``attachment`` (a stored voice note) with a note saying what was said, and the
    transcript (empty when there is none)."""
    assert attachment.path is not None
    if transcriber is None:
        note = (
            "a voice note arrived; it was not transcribed (no transcription provider is configured)"
        )
        return replace(attachment, note=note), ""
    try:
        transcript = await transcriber.transcribe(Path(attachment.path))
    except TranscriptionError as exc:
        log.warning("%s: transcription failed: %s", attachment.kind, exc)
        return replace(attachment, note=f"a voice note arrived; transcription failed: {exc}"), ""
    note = f"voice note, transcribed: {transcript}" if transcript else "an empty voice note"
    return replace(attachment, note=note), transcript
