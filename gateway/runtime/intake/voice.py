"""Speech for every channel: one OpenAI-compatible server (``[voice]``) for voice notes in
(``/audio/transcriptions``) and spoken replies out (``/audio/speech``).

:class:`Speech` owns the openai SDK client; :class:`Allowance` decides whether a person's
voice note may still be transcribed today. Channels know nothing of either: they store what
people send, and :mod:`gateway.runtime.intake.understanding` hands voice notes and audio files here.
"""

from __future__ import annotations

import asyncio
import logging
import re
import struct
import wave
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.request import TurnOutcome, TurnRequest
from gateway.config.media import VoiceSettings
from gateway.core.messages import Attachment, OutboundKind
from gateway.core.principal import Principal
from gateway.store.metering.voice import VoiceMinutes

log = logging.getLogger(__name__)

_ASSUMED_BYTES_PER_SECOND = 16_000  # 128 kbit/s: when neither the server nor the file says


class SpeechError(Exception):
    """The speech server failed or refused; the message says how."""


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    seconds: float  # how long the recording is: what the allowance is charged


class Speech:
    """The speech server, through the openai SDK (imported only when voice is configured)."""

    def __init__(self, settings: VoiceSettings) -> None:
        import openai  # noqa: PLC0415 - about a second of imports, only with voice on

        self.settings = settings
        self._errors: tuple[type[Exception], ...] = (openai.OpenAIError,)
        self._bad_request: type[Exception] = openai.BadRequestError
        self._verbose = True  # ask for the duration until the server refuses verbose_json
        key = settings.api_key.get_secret_value() if settings.api_key else None
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=key or "not-needed",
            max_retries=1,
            timeout=settings.timeout_seconds,
        )

    async def transcribe(self, path: Path) -> Transcript:
        try:
            result = await self._transcription(path)
        except self._errors as exc:
            raise SpeechError(str(exc)) from exc
        text = str(getattr(result, "text", result)).strip()
        reported = getattr(result, "duration", None)
        if isinstance(reported, (int, float)) and reported > 0:
            return Transcript(text, float(reported))
        return Transcript(text, await asyncio.to_thread(audio_seconds, path))

    async def _transcription(self, path: Path) -> Any:
        create = self._client.audio.transcriptions.create
        if self._verbose:
            try:
                return await create(
                    model=self.settings.model, file=path, response_format="verbose_json"
                )
            except self._bad_request:  # gpt-4o-transcribe and some servers: plain json only
                self._verbose = False
        return await create(model=self.settings.model, file=path)

    async def speak(self, text: str, target: Path) -> Path:
        """``text`` spoken into ``target`` (Ogg Opus: what Telegram plays as a voice message)."""
        try:
            response = await self._client.audio.speech.create(
                model=self.settings.speech_model,
                voice=self.settings.speech_voice,
                input=text,
                response_format="opus",
            )
        except self._errors as exc:
            raise SpeechError(str(exc)) from exc
        await asyncio.to_thread(_write, target, response.content)
        return target

    async def aclose(self) -> None:
        await self._client.close()


class Allowance:
    """Members are transcribed within ``max_minutes_per_person_per_day``; admins and the
    owner are not counted against it (their minutes are still recorded)."""

    def __init__(self, minutes: VoiceMinutes, settings: VoiceSettings) -> None:
        self._minutes = minutes
        self._limit = settings.max_minutes_per_person_per_day * 60

    async def refusal(self, principal: Principal, now: datetime) -> str | None:
        """Why ``principal``'s next voice note is not transcribed today, or None."""
        if principal.is_admin:
            return None
        if self._limit <= 0:
            return "voice notes are not transcribed for members"
        used = await self._minutes.used(principal.person, _day(now))
        if used >= self._limit:
            return (
                f"today's {self._limit / 60:g} minutes of transcription for this person are "
                "used up; they may type, or try again tomorrow"
            )
        return None

    async def charge(self, principal: Principal, now: datetime, seconds: float) -> None:
        await self._minutes.add(principal.person, _day(now), seconds)


def _day(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def _write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def audio_seconds(path: Path) -> float:
    """How long a recording is, read from the file (Ogg: the last page's granule position
    at Opus's 48 kHz; WAV: its frames), else estimated from its size."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0.0
    if data.startswith(b"OggS"):
        last = data.rfind(b"OggS")
        if last + 14 <= len(data) and data[last + 4] == 0:  # version 0: a real page header
            (granule,) = struct.unpack_from("<q", data, last + 6)
            if 0 < granule < 48_000 * 86_400:
                return float(granule) / 48_000
    if data.startswith(b"RIFF"):
        try:
            with wave.open(str(path)) as recording:
                frames: int = recording.getnframes()
                rate: int = recording.getframerate()
            return frames / max(1, rate)
        except (wave.Error, EOFError):
            pass
    return len(data) / _ASSUMED_BYTES_PER_SECOND


class SpokenReplies:
    """``voice.reply = "auto"``: whoever spoke (a voice note transcribed in the turn's last
    message) hears the answer too, as a voice message beside the text (Telegram's
    ``sendVoice``; an audio file where a platform has no voice messages). Answers over
    ``max_reply_chars`` stay text only; a speech failure never holds the answer back, and
    the person is told under the text, once (again only after a spoken reply worked): the
    owner with the server's reason and where to look, anyone else in a plain sentence."""

    def __init__(self, speech: Speech, root: Path) -> None:
        self._speech = speech
        self._root = root  # workspace/attachments/voice-replies: files that go out
        self._told: set[str] = set()  # people told of a failure since speech last worked

    async def add(self, request: TurnRequest, outcome: TurnOutcome) -> TurnOutcome:
        last = request.messages[-1] if request.messages else None
        if last is None or not any(a.kind == "voice" and a.transcript for a in last.attachments):
            return outcome
        replies = list(outcome.replies)
        for index, reply in enumerate(replies):
            if reply.kind is not OutboundKind.REPLY or reply.chat != last.chat:
                continue
            spoken = _speakable(reply.text)
            if not spoken or len(spoken) > self._speech.settings.max_reply_chars:
                return outcome
            day = datetime.now(UTC).strftime("%Y-%m-%d")
            target = self._root / day / f"{_SAFE.sub('', request.turn_id)}.ogg"
            try:
                await self._speech.speak(spoken, target)
            except (SpeechError, OSError) as exc:
                log.warning("voice reply for turn %s failed: %s", request.turn_id, exc)
                note = self._failure_note(request, exc)
                if not note:
                    return outcome
                replies[index] = replace(reply, text=f"{reply.text.rstrip()}\n\n{note}")
                return replace(outcome, replies=tuple(replies))
            self._told.clear()
            voice = Attachment(
                "voice", path=str(target), mime_type="audio/ogg", filename="reply.ogg"
            )
            replies[index] = replace(reply, attachments=(*reply.attachments, voice))
            return replace(outcome, replies=tuple(replies))
        return outcome

    def _failure_note(self, request: TurnRequest, exc: Exception) -> str:
        """What the person is told of a spoken reply that failed; empty once they were."""
        person = request.principal.person
        if person in self._told:
            return ""
        self._told.add(person)
        if not request.principal.is_owner:
            return (
                "(I could not answer with a voice message this time: the answer is only in "
                "writing.)"
            )
        reason = " ".join(str(exc).split())[:200]
        return (
            f"(I could not answer with a voice message: the speech server failed ({reason}). "
            '`switchboard doctor` checks [voice]; voice.reply = "never" turns spoken '
            "replies off. I say this once, until one works again.)"
        )


_SAFE = re.compile(r"[^A-Za-z0-9_-]")
_MARKUP = re.compile(r"[*_`#>|~]+|\[([^\]]*)\]\([^)]*\)")


def _speakable(text: str) -> str:
    """Markdown read aloud would say its asterisks: keep the words (a link's text)."""
    return _MARKUP.sub(lambda m: m.group(1) or "", text).strip()
