"""Doctor's checks of the services the assistant works in for the owner: the calendar's
login (``[calendar]``), by finding the account's calendars as the tool does; the speech
server (``[voice]``), by transcribing a moment of silence and, with spoken replies on,
saying one word, as voice notes and answers would (a spoken reply that fails only leaves a
line in the log and a note under one answer)."""

from __future__ import annotations

import tempfile
import wave
from pathlib import Path

from gateway.cli.doctor.checks import Check
from gateway.config.settings import Settings
from gateway.core.urls import shown_url


async def calendar_check(settings: Settings) -> list[Check]:
    if not settings.calendar.enabled:
        return []
    from agent.calendar.caldav import CalDav, CalendarError  # noqa: PLC0415 - when configured

    client = CalDav(settings.calendar)
    try:
        account = await client.account()
    except CalendarError as exc:
        return [Check("calendar", "fail", f"{exc}")]
    names = ", ".join(repr(c.name) for c in account.calendars)
    count = len(account.calendars)
    invites = (
        "it sends invitations to attendees itself"
        if account.schedules
        else "it sends no invitations (attendees are only recorded on the event)"
    )
    return [
        Check(
            "calendar",
            "ok",
            f"signed in at {client.url}: {count} calendar{'' if count == 1 else 's'} "
            f"({names}); {invites}",
        )
    ]


async def voice_check(settings: Settings) -> list[Check]:
    voice = settings.speech()
    if not voice.enabled:
        return []
    from gateway.runtime.intake.voice import Speech, SpeechError  # noqa: PLC0415 - configured

    where = shown_url(voice.base_url) if voice.base_url else "OpenAI"
    speech = Speech(voice)
    try:
        with tempfile.TemporaryDirectory(prefix="switchboard-doctor-") as folder:
            silence = _silence(Path(folder) / "silence.wav")
            try:
                await speech.transcribe(silence)
            except SpeechError as exc:
                return [
                    Check(
                        "voice",
                        "fail",
                        f"voice notes cannot be transcribed: {where} failed "
                        f"({_short(exc)}); check voice.base_url and voice.model "
                        f"({voice.model})",
                    )
                ]
            said = f"voice notes are transcribed by {voice.model} at {where}"
            if voice.reply != "auto":
                return [Check("voice", "ok", f"{said}; spoken replies are off")]
            try:
                await speech.speak("OK", Path(folder) / "spoken.ogg")
            except SpeechError as exc:
                return [
                    Check(
                        "voice",
                        "fail",
                        f"{said}, but spoken replies fail: {where}/audio/speech failed "
                        f"({_short(exc)}); check voice.speech_model ({voice.speech_model}) and "
                        'voice.speech_voice, or set voice.reply = "never"',
                    )
                ]
            return [Check("voice", "ok", f"{said}; replies are spoken by {voice.speech_model}")]
    finally:
        await speech.aclose()


def _silence(path: Path) -> Path:
    """A tenth of a second of silence (16 kHz mono WAV): the smallest thing to transcribe."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(b"\x00\x00" * 1_600)
    return path


def _short(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
