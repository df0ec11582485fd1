"""Typed LLM failures, mapped once from each SDK's exceptions.

::

    LLMError
    ├── LLMNotConfigured      no API key and no base URL: nothing to call (raised at once)
    ├── LLMRateLimited        429 after the SDK's own retries (carries retry_after)
    ├── LLMUnavailable        5xx, overload, connection refused, DNS, timeout, a body
    │   │                     that is no answer (a web page at the base URL)
    │   └── LLMAllModelsFailed  every model of a fallback chain failed one call
    ├── LLMContextOverflow    the prompt does not fit the model's window
    ├── LLMAuthError          bad or missing API key, no access to the model
    └── LLMBadRequest         the provider rejected the request for another reason
        └── LLMNotFound       404: the base URL lacks /v1, or the model does not exist

Each error carries what to tell people: ``user_message`` (the cause, one sentence) and
``fix`` (what the operator should do). They are built where the error is translated
(:mod:`agent.llm.diagnose`), so the chat notice, the operator's log and ``switchboard doctor``
all say the same precise thing. ``transient`` errors may pass when retried; the others need
a configuration change. Only transient errors move a call on to a fallback model
(:mod:`agent.llm.fallback`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from agent.llm.types import Failover


class LLMError(Exception):
    """A provider call failed after the SDK's retries."""

    user_message = "The AI model could not be reached."
    fix = ""
    transient = False
    # Models of a fallback chain that failed the same call before this error (trace).
    failovers: tuple[Failover, ...] = ()

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        user_message: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        if user_message is not None:
            self.user_message = user_message
        if fix is not None:
            self.fix = fix

    def explain(self) -> str:
        """The cause and the fix, for a person: the notice, the log, ``doctor``."""
        return f"{self.user_message} {self.fix}".strip()


class LLMNotConfigured(LLMError):
    user_message = "No AI model is configured (no API key and no base URL)."


class LLMRateLimited(LLMError):
    user_message = "The AI provider is rate-limiting us right now."
    transient = True

    def __init__(
        self, message: str, *, retry_after: float | None = None, status_code: int | None = 429
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.retry_after = retry_after


class LLMUnavailable(LLMError):
    user_message = "The AI provider is unavailable or did not answer in time."
    transient = True


class LLMAllModelsFailed(LLMUnavailable):
    """Each model of the chain failed the call for a passing reason (or was cooling down)."""

    def __init__(self, failovers: Sequence[Failover], last: LLMError) -> None:
        reasons = "; ".join(f"{f.model}: {f.reason}" for f in failovers)
        super().__init__(
            f"all {len(failovers)} models failed ({reasons})",
            status_code=last.status_code,
            user_message=f"None of the {len(failovers)} configured models answered ({reasons}).",
            fix=last.fix,
        )
        self.failovers = tuple(failovers)


class LLMContextOverflow(LLMError):
    user_message = "The conversation is too long for the model's context window."

    def __init__(
        self, message: str, *, status_code: int | None = None, window: int | None = None
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.window = window  # the window the provider named in its refusal, if it did


class LLMAuthError(LLMError):
    user_message = "The AI provider refused our credentials (check the API key)."


class LLMBadRequest(LLMError):
    user_message = "The AI provider rejected the request."


class LLMNotFound(LLMBadRequest):
    user_message = "The AI provider answered 404 Not Found."


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
            "exceeds the available context size",  # llama.cpp's server
            "exceed_context_size_error",
        )
    )


def window_from_error(message: str) -> int | None:
    """The window a "context too long" refusal names, if it does: OpenAI, vLLM and
    llama-cpp-python ("maximum context length is 8192 tokens"), llama.cpp's server
    (``"n_ctx": 8192``), Anthropic ("prompt is too long: 250000 tokens > 200000 maximum")."""
    patterns = (
        r"maximum context length is (\d+)",
        r"context window of (\d+)",
        r"['\"]n_ctx['\"]\s*:\s*(\d+)",
        r"> (\d+) maximum",
    )
    for pattern in patterns:
        match = re.search(pattern, message)
        if match and int(match.group(1)) >= 256:
            return int(match.group(1))
    return None


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
