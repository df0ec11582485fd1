"""What people send besides text: ``[voice]`` (speech in and out) and ``[tools.documents]``.

``[voice]`` names one OpenAI-compatible speech server (OpenAI, Groq, a local whisper
server) for every channel: voice notes and audio files are transcribed through its
``/audio/transcriptions``, and spoken replies (``reply = "auto"``) come from its
``/audio/speech``. Members (``allow_from``, or approved by pairing) are transcribed within
``max_minutes_per_person_per_day``; admins and the owner without a cap.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

VoiceReply = Literal["auto", "never"]


class VoiceSettings(BaseModel):
    """Speech to text for every channel, and optional spoken replies (docs/channels.md#voice)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None  # the server's /v1 root; unset with api_key unset: voice is off
    api_key: SecretStr | None = None  # unset: the server needs none (a local whisper)
    model: str = "whisper-1"  # transcription model (whisper-large-v3 on Groq, ...)
    reply: VoiceReply = "never"  # `auto`: answer a voice note with a voice message too; `never`
    speech_model: str = "tts-1"  # spoken replies: the /audio/speech model
    speech_voice: str = "alloy"  # the voice it speaks with (the server's names)
    max_reply_chars: int = Field(default=1_500, ge=50, le=4_096)  # longer answers: text only
    max_minutes_per_person_per_day: float = Field(default=30.0, ge=0)  # members; 0: none
    timeout_seconds: float = Field(default=120.0, gt=0, le=600)  # per transcription or speech call

    @property
    def enabled(self) -> bool:
        return bool(self.base_url or (self.api_key and self.api_key.get_secret_value()))

    @model_validator(mode="after")
    def _reply_needs_a_server(self) -> VoiceSettings:
        if self.reply == "auto" and not self.enabled:
            raise ValueError(
                'reply = "auto" needs a speech server: set voice.base_url '
                "(or voice.api_key for OpenAI's)"
            )
        return self


class DocumentSettings(BaseModel):
    """How documents are read (docs/security.md#documents): each read runs in a process
    of its own with these limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inline_tokens: int = Field(default=2_000, ge=0)  # shorter documents go with the message
    max_read_chars: int = Field(
        default=12_000, ge=1_000, le=200_000
    )  # one read_file answer; it says where to go on
    max_pages_per_read: int = Field(
        default=50, ge=1, le=1_000
    )  # pages, slides or chapters asked at once
    timeout_seconds: float = Field(
        default=20.0, gt=0, le=300
    )  # then the reader is killed (CPU: the same)
    memory_mb: int = Field(default=512, ge=128, le=8_192)  # address space of the reader
    max_expanded_mb: int = Field(default=200, ge=1, le=4_096)  # DOCX/XLSX/PPTX/EPUB unpacked
    concurrency: int = Field(default=2, ge=1, le=16)  # documents read at once
    scan_pages: int = Field(default=4, ge=0, le=20)  # a scan's first pages, sent as pictures
    ocr: Literal["auto", "always", "off"] = "auto"
    ocr_languages: str = Field(default="eng", pattern=r"^[a-z_]{3,}(\+[a-z_]{3,})*$")
