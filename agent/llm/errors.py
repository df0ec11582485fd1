"""Typed LLM failures, mapped once from each SDK's exceptions.

::

    LLMError
    ├── LLMRateLimited        429 after the SDK's own retries (carries retry_after)
    ├── LLMUnavailable        5xx, overload, connection failure, timeout
    ├── LLMContextOverflow    the prompt does not fit the model's window
    ├── LLMAuthError          bad or missing API key, no access to the model
    └── LLMBadRequest         the provider rejected the request for another reason
"""

from __future__ import annotations

from collections.abc import Mapping


class LLMError(Exception):
    """A provider call failed after the SDK's retries."""

    user_message = "The AI model could not be reached."

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class LLMRateLimited(LLMError):
    user_message = "The AI provider is rate-limiting us right now."

    def __init__(
        self, message: str, *, retry_after: float | None = None, status_code: int | None = 429
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.retry_after = retry_after


class LLMUnavailable(LLMError):
    user_message = "The AI provider is unavailable or did not answer in time."


class LLMContextOverflow(LLMError):
    user_message = "The conversation is too long for the model's context window."


class LLMAuthError(LLMError):
    user_message = "The AI provider refused our credentials (check the API key)."


class LLMBadRequest(LLMError):
    user_message = "The AI provider rejected the request."


def is_context_overflow(message: str) -> bool:
    """Whether a provider's 400 message says the prompt is too long.

    Providers report this only in prose (OpenAI also sets ``code``); this is the one place
    that reads it.
    """
    text = message.lower()
    return any(
        phrase in text
        for phrase in (
            "context_length_exceeded",
            "maximum context length",
            "context window",
            "prompt is too long",
            "too many tokens",
            "reduce the length",
        )
    )


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``Retry-After`` (or ``retry-after-ms``); ``None`` if absent."""
    millis = headers.get("retry-after-ms")
    seconds = headers.get("retry-after")
    try:
        if millis is not None:
            return float(millis) / 1000
        return float(seconds) if seconds is not None else None
    except ValueError:
        return None
