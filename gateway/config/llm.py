"""``[llm]``: which model to talk to, and the checks that catch a wrong URL at load."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gateway.config.prices import ModelPrice
from gateway.core.urls import has_userinfo

log = logging.getLogger(__name__)

Provider = Literal["openai", "anthropic"]
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


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


def one_authorization(base_url: str | None, api_key: SecretStr | None) -> None:
    """A base URL's user name and password go as HTTP basic auth, in the ``Authorization``
    header, where the SDKs also send the API key (``Bearer``): with both set one would be
    lost without a word, so the configuration is refused instead."""
    if api_key is None or not has_userinfo(base_url):
        return
    raise ValueError(
        "base_url has a user name and password (sent as HTTP basic auth) and api_key is set "
        "too: a request has one Authorization header, so one of them would be lost. Leave "
        "api_key unset (a proxy that asks for a password usually keeps the server's key "
        "itself), or take the user name and password out of the URL"
    )


class FallbackModel(BaseModel):
    """One model to continue on when the ones before it fail (``llm.fallbacks``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider = "openai"  # `openai` (any OpenAI-compatible server) or `anthropic`
    model: str = Field(min_length=1)  # required: the model name as its provider knows it
    base_url: str | None = None  # for openai the `/v1` root; default: the provider's public API
    api_key: SecretStr | None = (
        None  # default: llm.api_key if provider and base_url are the primary's, else OPENAI_API_KEY / ANTHROPIC_API_KEY (a key never goes to another server)
    )

    @field_validator("base_url")
    @classmethod
    def _url_with_scheme(cls, value: str | None, info: ValidationInfo) -> str | None:
        return model_base_url(value, info.data.get("provider"))

    @field_validator("api_key")
    @classmethod
    def _one_authorization(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        one_authorization(info.data.get("base_url"), value)
        return value


def same_server(provider: str, base_url: str | None, other: str, other_url: str | None) -> bool:
    """Whether two model settings talk to the same server (so one key may serve both)."""
    mine = (base_url or DEFAULT_URLS[provider]).rstrip("/")
    theirs = (other_url or DEFAULT_URLS[other]).rstrip("/")
    return provider == other and mine == theirs


def repeated_model(
    provider: str, model: str | None, base_url: str | None, fallbacks: tuple[FallbackModel, ...]
) -> str | None:
    """Why ``fallbacks`` repeat their primary model or one another, or None when they do not:
    a fallback must be another model or server (the same one fails the same way)."""

    def url(provider: str, base_url: str | None) -> str:
        return (base_url or DEFAULT_URLS[provider]).rstrip("/")

    seen = [(provider, model, url(provider, base_url))]
    for index, fallback in enumerate(fallbacks):
        this = (fallback.provider, fallback.model, url(fallback.provider, fallback.base_url))
        if this in seen:
            which = "the primary model" if seen.index(this) == 0 else "an earlier fallback"
            return (
                f"[{index}] {fallback.provider} model {fallback.model!r} at {this[2]} is "
                f"already {which}; a fallback must be another model or server"
            )
        seen.append(this)
    return None


class LLMSettings(BaseModel):
    """Which model to talk to and how patiently."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider = "openai"
    model: str = Field(default="gpt-4o-mini", min_length=1)  # as its provider names it
    # the server's root (described in gateway/config/reference/doc.py: DESCRIPTIONS)
    base_url: str | None = None
    api_key: SecretStr | None = None  # falls back to OPENAI_API_KEY / ANTHROPIC_API_KEY
    context_window: int = Field(default=128_000, ge=2_048)
    max_tokens: int = Field(default=4_096, ge=64)
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    temperature: float | None = Field(default=None, ge=0, le=2)
    vision: bool = True
    # [llm.prices."<model>"]: US dollars per million tokens, over the shipped table
    # (gateway/config/prices.py); every model of the gateway is looked up here.
    prices: dict[str, ModelPrice] = {}
    # Deprecated: the price of llm.model before [llm.prices] (read as its entry there).
    input_price_per_million: float | None = Field(default=None, ge=0)
    output_price_per_million: float | None = Field(default=None, ge=0)
    cached_input_price_per_million: float | None = Field(default=None, ge=0)

    # Tried in order when a call fails for a passing reason (connection, 5xx, 429, overload).
    fallbacks: tuple[FallbackModel, ...] = ()
    # A model that failed so is skipped this long (0: always tried first again).
    fallback_cooldown_seconds: float = Field(default=60.0, ge=0, le=86_400)

    @field_validator("base_url")
    @classmethod
    def _url_with_scheme(cls, value: str | None, info: ValidationInfo) -> str | None:
        return model_base_url(value, info.data.get("provider"))

    @field_validator("api_key")
    @classmethod
    def _one_authorization(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        one_authorization(info.data.get("base_url"), value)
        return value

    @model_validator(mode="after")
    def _old_prices(self) -> LLMSettings:
        """``llm.*_price_per_million`` (before ``[llm.prices]``) price ``llm.model``, unless
        ``[llm.prices]`` names it itself; a warning says to move them."""
        old = (
            self.input_price_per_million,
            self.cached_input_price_per_million,
            self.output_price_per_million,
        )
        if all(value is None for value in old):
            return self
        log.warning(
            "llm.input_price_per_million, llm.cached_input_price_per_million and "
            'llm.output_price_per_million are deprecated: move them to [llm.prices."%s"] '
            "as input, cached_input and output",
            self.model,
        )
        if self.model not in self.prices:
            price = ModelPrice(input=old[0] or 0.0, cached_input=old[1], output=old[2] or 0.0)
            object.__setattr__(self, "prices", {**self.prices, self.model: price})
        return self

    @field_validator("fallbacks")
    @classmethod
    def _distinct_fallbacks(
        cls, value: tuple[FallbackModel, ...], info: ValidationInfo
    ) -> tuple[FallbackModel, ...]:
        provider = info.data.get("provider", "openai")
        problem = repeated_model(provider, info.data.get("model"), info.data.get("base_url"), value)
        if problem is not None:
            raise ValueError(problem)
        return value

    def fallback_settings(self) -> tuple[LLMSettings, ...]:
        """Each fallback as full model settings: the primary's limits (timeout, retries,
        window, vision) with the fallback's provider, model, server and key."""
        out = []
        for fallback in self.fallbacks:
            key = fallback.api_key
            if key is None and same_server(
                fallback.provider, fallback.base_url, self.provider, self.base_url
            ):
                key = self.api_key
            update = {
                "provider": fallback.provider,
                "model": fallback.model,
                "base_url": fallback.base_url,
                "api_key": key,
                "fallbacks": (),
            }
            out.append(self.model_copy(update=update))
        return tuple(out)

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> SecretStr | None:
        if self.api_key is not None:
            return self.api_key
        env = os.environ if environ is None else environ
        value = env.get(KEY_VARIABLES[self.provider])
        return SecretStr(value) if value else None
