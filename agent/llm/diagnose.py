"""What exactly went wrong with a model call, in words a person can act on.

The providers map SDK exceptions to the types in :mod:`agent.llm.errors`; this module
fills in the cause and the fix. It reads the exception chain (not message strings) to tell
a refused connection from a timeout or a DNS failure: the SDKs' aiohttp transport reports
all three as a "timeout". The same text reaches the owner's notice, the operator's log and
``switchboard doctor``; other people get a short notice without it
(:func:`agent.turn.outcome.provider_notice`). A server's address is always shown without
the user name and password a base URL may carry (:func:`gateway.core.urls.shown_url`).
"""

from __future__ import annotations

import errno
import re
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from agent.llm.errors import (
    LLMAuthError,
    LLMBadRequest,
    LLMNotConfigured,
    LLMNotFound,
    LLMUnavailable,
)
from gateway.core.urls import shown_url

DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
DOCTOR = "`switchboard doctor` checks the model settings."
ONBOARD = "onboard"  # a model given to `switchboard onboard` (a flag or an answer)
ONBOARD_ANSWERS = {
    "base_url": "the base URL you gave (--base-url, or the Base URL answer)",
    "model": "the model name you gave (--model, or the Model answer)",
    "api_key": "the API key you gave (--api-key, or the API key answer)",
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The model a provider calls, as configured."""

    provider: Literal["openai", "anthropic"]
    base_url: str | None
    model: str
    timeout: float
    has_key: bool
    setting: str = "llm"  # where the model is configured: "llm", "llm.fallbacks[0]", ...
    password: bool = False  # the base URL's user name and password go as HTTP basic auth

    @property
    def url(self) -> str:
        """The server's address as it may be shown: never with a user name or password."""
        return shown_url((self.base_url or DEFAULT_URLS[self.provider]).rstrip("/"))

    @property
    def key_settings(self) -> str:
        variable = KEY_VARIABLES[self.provider]
        if self.setting == ONBOARD:
            return f"{ONBOARD_ANSWERS['api_key']} or {variable}"
        if self.setting == "llm":
            return f"SWITCHBOARD_LLM__API_KEY (or {variable})"
        return f"{self.name('api_key')} or {variable}"

    def name(self, field: str) -> str:
        """How the operator sets ``field`` of this model."""
        return setting_name(self.setting, field)


def setting_name(setting: str, field: str) -> str:
    """The setting to fix for ``field`` of the model configured at ``setting``: the primary
    model's key and the two places it is set (its API key: the variable), the entry's path
    for any other (a fallback is one entry of a list: ``llm.fallbacks[1].base_url``)."""
    if setting == "llm":
        variable = f"SWITCHBOARD_LLM__{field.upper()}"
        if field == "api_key":  # a secret: in .env or the environment, never config.toml
            return variable
        return f"llm.{field} in config.toml or {variable}"
    if setting == ONBOARD:  # the person just typed it, as a flag or at a prompt
        return ONBOARD_ANSWERS.get(field, f"the {field.replace('_', ' ')} you gave")
    if setting.startswith("llm.fallbacks["):
        return (
            f"{setting}.{field} (that entry of SWITCHBOARD_LLM__FALLBACKS, or of the "
            "[[llm.fallbacks]] tables in config.toml)"
        )
    return f"{setting}.{field}"


def not_configured(
    provider: Literal["openai", "anthropic"], setting: str = "llm"
) -> LLMNotConfigured:
    variable = KEY_VARIABLES[provider]
    local = (  # Ollama and its like speak OpenAI's API, not Anthropic's
        "an Anthropic-compatible server of your own"
        if provider == "anthropic"
        else "a local server such as Ollama (http://localhost:11434/v1)"
    )
    if setting == ONBOARD:  # none was given: not "the API key you gave"
        return LLMNotConfigured(
            "no API key and no base URL given",
            fix=(
                f"Give an API key (--api-key, or the API key answer) or set {variable}, or "
                f"give the base URL (--base-url, or the Base URL answer) of {local}. "
            )
            + DOCTOR,
        )
    key = setting_name(setting, "api_key")
    return LLMNotConfigured(
        "no API key and no base URL configured",
        fix=(
            (f"Set {key} (or {variable})" if setting == "llm" else f"Set {key} or {variable}")
            + ", or point "
            + f"{setting_name(setting, 'base_url')} at {local}. "
            + ("`switchboard onboard` asks for both; " if setting == "llm" else "")
            + DOCTOR
        ),
    )


def connection_failed(exc: BaseException, at: Endpoint, *, timed_out: bool) -> LLMUnavailable:
    """A request that got no HTTP answer: refused, unresolvable, TLS, or too slow."""
    causes = list(_chain(exc))
    innermost = causes[-1]  # the SDK's own words ("Request timed out.") can mislead
    detail = f"{type(innermost).__name__}: {innermost}"
    if any(out_of_descriptors(c) for c in causes):
        return LLMUnavailable(
            f"cannot connect to {at.url}: no file descriptor left ({detail})",
            user_message=f"The gateway could not open a connection to {at.url}: it has too "
            "many files and connections open right now.",
            fix="It passes as connections close; if it lasts, raise the open-files limit "
            "(LimitNOFILE= of the service, ulimit -n) or lower limits.http_connections.",
        )
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return LLMUnavailable(
            f"connection refused by {at.url} ({detail})",
            user_message=f"Nothing is listening at {at.url} (connection refused).",
            fix=f"Is the model server running? Start it, or correct {at.name('base_url')}.",
        )
    if any(isinstance(c, socket.gaierror) for c in causes):
        host = urlsplit(at.url).hostname or at.url
        return LLMUnavailable(
            f"cannot resolve {host} ({detail})",
            user_message=f"The host name {host} (from {at.url}) cannot be resolved.",
            fix=f"Check {at.name('base_url')} and this machine's network and DNS.",
        )
    tls = next((c for c in causes if isinstance(c, ssl.SSLError)), None)
    if tls is not None:
        return LLMUnavailable(
            f"TLS with {at.url} failed ({detail})",
            user_message=f"The secure connection to {at.url} failed: {tls}.",
            fix="Local servers usually speak plain http://; otherwise check the certificate.",
        )
    if timed_out:
        return LLMUnavailable(
            f"no answer from {at.url} within {at.timeout:g} s ({detail})",
            user_message=f"{at.url} did not answer within {at.timeout:g} s.",
            fix="The server may be busy or still loading the model; raise "
            "SWITCHBOARD_LLM__TIMEOUT_SECONDS for a slow local model.",
        )
    return LLMUnavailable(
        f"cannot connect to {at.url} ({detail})",
        user_message=f"Cannot connect to {at.url}: {innermost or type(innermost).__name__}.",
        fix=f"Check {at.name('base_url')}; " + DOCTOR,
    )


def out_of_descriptors(exc: BaseException) -> bool:
    """Whether ``exc`` says the process (or the system) has no file descriptor left: a
    passing shortage (connections held by clients, a burst), not a wrong setting."""
    return isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)


def refused_key(at: Endpoint, status: int | None, message: str) -> LLMAuthError:
    if status == 403:
        return LLMAuthError(
            message,
            status_code=status,
            user_message=f"{at.url} refused access (HTTP 403): the API key may not be allowed "
            f"to use the model {at.model!r}.",
            fix=f"Check the key's permissions, {at.key_settings} and {at.name('model')}.",
        )
    if at.password:
        return LLMAuthError(
            message,
            status_code=status,
            user_message=f"{at.url} refused the user name and password of the base URL "
            f"(HTTP {status}).",
            fix=f"Check the user name and password in {at.name('base_url')}.",
        )
    if not at.has_key:
        return LLMAuthError(
            message,
            status_code=status,
            user_message=f"{at.url} wants an API key and none is configured (HTTP {status}).",
            fix=f"Set {at.key_settings}.",
        )
    return LLMAuthError(
        message,
        status_code=status,
        user_message=f"{at.url} refused the API key (HTTP {status}).",
        fix=f"Check {at.key_settings}; the key may be wrong, revoked or for another provider.",
    )


_VERSION = re.compile(r"/v\d+[a-z]*\d*$")  # an API version at the end of a path


def not_found(at: Endpoint, message: str, code: object = None) -> LLMNotFound:
    """A 404: an unknown model, or a base URL that misses (or doubles) the ``/v1`` root."""
    path = urlsplit(at.url).path.rstrip("/")
    if code == "model_not_found" or "model" in message.lower():
        return LLMNotFound(
            message,
            status_code=404,
            user_message=f"{at.url} does not know the model {at.model!r} (HTTP 404).",
            fix=f"Check {at.name('model')} (for Ollama, `ollama list` shows the models).",
        )
    other = _VERSION.search(path)
    if at.provider == "openai" and other is not None and other.group(0) != "/v1":
        root = at.url.rstrip("/").removesuffix(other.group(0))
        return LLMNotFound(
            message,
            status_code=404,
            user_message=f"{at.url} has no /chat/completions (HTTP 404): the base URL ends in "
            f"{other.group(0)}, and OpenAI-compatible servers answer at /v1.",
            fix=f"Set {at.name('base_url')} to {root}/v1.",
        )
    if at.provider == "openai" and not path.endswith("/v1"):
        return LLMNotFound(
            message,
            status_code=404,
            user_message=f"{at.url} has no /chat/completions (HTTP 404): the base URL is "
            "missing /v1.",
            fix=f"Set {at.name('base_url')} to {at.url}/v1.",
        )
    if at.provider == "anthropic" and path.endswith("/v1"):
        return LLMNotFound(
            message,
            status_code=404,
            user_message=f"{at.url}/v1/messages does not exist (HTTP 404): for Anthropic the "
            "base URL must not end in /v1 (the SDK adds it).",
            fix=f"Set {at.name('base_url')} to {at.url.removesuffix('/v1')}.",
        )
    where = "/chat/completions" if at.provider == "openai" else "/v1/messages"
    return LLMNotFound(
        message,
        status_code=404,
        user_message=f"{at.url} has no {where} (HTTP 404).",
        fix=f"Check {at.name('base_url')}"
        + (
            ": for OpenAI-compatible servers it is the /v1 root."
            if at.provider == "openai"
            else "."
        ),
    )


def server_error(at: Endpoint, status: int | None, message: str) -> LLMUnavailable:
    if status == 529:  # Anthropic's "overloaded"
        return LLMUnavailable(
            message,
            status_code=status,
            user_message=f"{at.url} is overloaded (HTTP 529).",
            fix="Temporary; a fallback model (llm.fallbacks) answers meanwhile.",
        )
    return LLMUnavailable(
        message,
        status_code=status,
        user_message=f"{at.url} failed with an internal error (HTTP {status}).",
        fix="Usually temporary; if it persists, look at the model server's own log.",
    )


def unreadable(at: Endpoint, what: str) -> LLMUnavailable:
    """A 200 whose body is not a complete answer: invalid JSON, a stream cut mid-answer."""
    return LLMUnavailable(
        f"{at.url}: {what}",
        user_message=f"{at.url} sent an answer that was cut off or could not be read ({what}).",
        fix="Usually a proxy or model server failing mid-answer; if it repeats, look at its log.",
    )


def not_an_api(at: Endpoint, body: str | None) -> LLMUnavailable:
    """A 200 that is no model's answer: a web page (a sign-in page, a single-page app's
    catch-all route, a proxy's splash page) or JSON of another kind. The base URL reaches
    something, but not the model's API; the SDKs hand such a body back as text, without an
    error, so this is said here. It is an outage for the turn (the fallbacks answer), and
    the setting to look at for the operator."""
    what = _what_it_is(body)
    api = "an OpenAI-compatible API" if at.provider == "openai" else "Anthropic's API"
    where = "/chat/completions" if at.provider == "openai" else "/v1/messages"
    path = urlsplit(at.url).path.rstrip("/")
    if at.provider == "openai" and not path.endswith("/v1"):
        fix = (
            f"Does it need /v1? Set {at.name('base_url')} to the model server's /v1 root "
            f"(such as {at.url}/v1)."
        )
    else:
        root = "/v1 root" if at.provider == "openai" else "address"
        fix = (
            f"Is that the model server? Set {at.name('base_url')} to the model server's "
            f"{root}, not a web page in front of it."
        )
    return LLMUnavailable(
        f"{at.url}{where} answered 200 with {what}",
        user_message=f"{at.url} answered {where} with {what}, not {api}.",
        fix=fix,
    )


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
SHOWN = 60  # characters of a body quoted in the words


def _what_it_is(body: str | None) -> str:
    """A body that is not an answer, in words: an HTML page (with its title), text (its
    start), JSON of another kind."""
    if body is None:
        return "JSON that is not an answer of the model"
    text = " ".join(body.split())
    if not text:
        return "an empty body"
    start = text[:1024].lower()
    if start.startswith(("<!doctype html", "<html", "<head", "<body")) or "<html" in start:
        title = _TITLE.search(text)
        named = " ".join(title.group(1).split())[:SHOWN] if title else ""
        return f'an HTML page ("{named}")' if named else "an HTML page"
    quoted = text if len(text) <= SHOWN else text[:SHOWN] + "…"
    return f'text that is not JSON ("{quoted}")'


def bad_request(at: Endpoint, status: int | None, message: str) -> LLMBadRequest:
    return LLMBadRequest(
        message,
        status_code=status,
        user_message=f"{at.url} rejected the request (HTTP {status}).",
        fix="The operator's log has the server's reason; " + DOCTOR,
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
