"""``[llm]``: which model to talk to, and the checks that catch a wrong URL at load."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator


def model_base_url(value: str | None, provider: str | None) -> str | None:
    """A base URL must say http:// or https://: ``localhost:11434`` is read by HTTP
    libraries as the scheme "localhost" and fails later with a useless "cannot connect"."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    parts = urlsplit(text)
    if parts.scheme in ("http", "https") and parts.netloc:
        return text
    rest = text.split("://", 1)[-1].lstrip("/")
    guess = f"http://{rest}"
    if provider != "anthropic" and not urlsplit(guess).path.rstrip("/"):
        guess += "/v1"
    raise ValueError(f"{text!r} is not an http:// or https:// URL; did you mean {guess!r}?")


class LLMSettings(BaseModel):
    """Which model to talk to and how patiently."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["openai", "anthropic"] = "openai"
    model: str = "gpt-4o-mini"
    base_url: str | None = None  # for openai the ``/v1`` root; Ollama: http://localhost:11434/v1
    api_key: SecretStr | None = None  # falls back to OPENAI_API_KEY / ANTHROPIC_API_KEY
    context_window: int = Field(default=128_000, ge=2_048)
    max_tokens: int = Field(default=4_096, ge=64)
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    temperature: float | None = Field(default=None, ge=0, le=2)
    vision: bool = True  # hand images to the model as image parts
    # Optional prices (per million tokens) for cost estimates on the status page.
    input_price_per_million: float | None = Field(default=None, ge=0)
    output_price_per_million: float | None = Field(default=None, ge=0)
    cached_input_price_per_million: float | None = Field(default=None, ge=0)

    @field_validator("base_url")
    @classmethod
    def _url_with_scheme(cls, value: str | None, info: ValidationInfo) -> str | None:
        return model_base_url(value, info.data.get("provider"))

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> SecretStr | None:
        if self.api_key is not None:
            return self.api_key
        env = os.environ if environ is None else environ
        name = "ANTHROPIC_API_KEY" if self.provider == "anthropic" else "OPENAI_API_KEY"
        value = env.get(name)
        return SecretStr(value) if value else None
