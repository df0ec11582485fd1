"""What a model's server says about it: how large its context window is, and whether it
sees pictures.

OpenAI-compatible servers have no standard fields for either, so each kind is asked its own
way, all at once (one short request each; a server ignores the questions that are not for it):

- llama.cpp's server: ``GET /props``, ``default_generation_settings.n_ctx`` (the window it
  was started with, ``--ctx-size``; not the model's trained length) and
  ``modalities.vision`` (whether it was given the model's image projector, ``--mmproj``);
- llama-cpp-python's server (what ``make local-model`` installs; it names itself in
  ``GET /openapi.json``): it says its window (``--n_ctx``) nowhere but in the refusal of a
  longer prompt, so it is sent one (:data:`PROBE_TOKENS` tokens, about 512 kB, which it
  only counts): "This model's maximum context length is 2048 tokens". The request also
  carries a stop word it cannot encode, which it reads after the length check and before
  any work, so a window larger than the probe still costs no model work: the request is
  refused for the stop word, and the window is not known;
- Ollama: ``POST /api/show``, the model's ``num_ctx`` parameter. Without one, Ollama serves
  its default window (4,096 tokens unless the server sets ``OLLAMA_CONTEXT_LENGTH``) and
  silently cuts longer prompts, whatever ``model_info["<arch>.context_length"]`` allows.
  Pictures: ``vision`` among its ``capabilities``;
- vLLM: ``GET /v1/models``, ``max_model_len``; OpenRouter: the same list, ``context_length``
  and ``architecture.input_modalities``;
- LM Studio: ``GET /api/v0/models``, ``loaded_context_length`` (else ``max_context_length``),
  and ``type`` (``vlm`` sees pictures, ``llm`` does not);
- the hosted APIs (OpenAI, Anthropic) do not say: a small table of known models gives the
  window, and their current models see pictures.

A provider's "context too long" refusal often names the window too
(:func:`agent.llm.errors.window_from_error`); the turn then uses that one.

:func:`served_models` reads the same ``GET /v1/models`` list for the names of the models a
server offers (``switchboard onboard`` proposes the first).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from agent.llm.errors import window_from_error

OLLAMA_DEFAULT = 4_096  # what Ollama serves a model without num_ctx (since 0.6; was 2,048)
PROBE_SECONDS = 5.0
LLAMA_CPP_PYTHON = "llama.cpp Python API"  # its OpenAPI title ("🦙 llama.cpp Python API")
PROBE_TOKENS = 262_144  # " a" that many times: a token each in the tokenizers we know

# Hosted models by name prefix, longest prefix wins. Only models whose window is published
# and stable; anything else is asked for.
KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude-", 200_000),
)
HOSTED = ("api.openai.com", "api.anthropic.com")


@dataclass(frozen=True, slots=True)
class FoundWindow:
    """A context window and where it was read (said to the person who set up the model)."""

    tokens: int
    source: str
    note: str = ""  # what else they should know (Ollama's default window)


@dataclass(frozen=True, slots=True)
class FoundPictures:
    """Whether the model sees pictures, and where that was read."""

    sees: bool
    source: str


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What the server said (``None``: it did not say)."""

    window: FoundWindow | None = None
    pictures: FoundPictures | None = None


def known_window(model: str) -> FoundWindow | None:
    """A hosted model's published window, by name."""
    name = model.lower().split("/")[-1]  # "openai/gpt-4o" on a router
    matches = [(prefix, tokens) for prefix, tokens in KNOWN_WINDOWS if name.startswith(prefix)]
    if not matches:
        return None
    prefix, tokens = max(matches, key=lambda match: len(match[0]))
    return FoundWindow(tokens, f"the published window of {prefix}* models")


async def detect(
    provider: str, base_url: str | None, model: str, api_key: str | None = None
) -> ServerFacts:
    """What the server (or the table of hosted models) says of ``model``."""
    if base_url is None or urlsplit(base_url).hostname in HOSTED:
        return ServerFacts(known_window(model))
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = aiohttp.ClientTimeout(total=PROBE_SECONDS)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as http:
        asks: list[Callable[[], Awaitable[ServerFacts]]] = [
            lambda: _llama_cpp(http, base_url),
            lambda: _llama_cpp_python(http, base_url),
            lambda: _listed(http, f"{base_url.rstrip('/')}/models", model, MODEL_LIST_FIELDS),
            lambda: _listed(http, f"{_root(base_url)}/api/v0/models", model, LM_STUDIO_FIELDS),
            lambda: _ollama(http, base_url, model),
        ]
        found = await asyncio.gather(*(_quietly(ask) for ask in asks))
    window = next((f.window for f in found if f.window is not None), None)
    pictures = next((f.pictures for f in found if f.pictures is not None), None)
    return ServerFacts(window or known_window(model), pictures)


async def served_models(base_url: str, api_key: str | None = None) -> list[str] | None:
    """The ids of the models an OpenAI-compatible server lists (``GET <base_url>/models``),
    in its order; empty when it lists none, ``None`` when nothing answers there."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = aiohttp.ClientTimeout(total=PROBE_SECONDS)

    async def listed() -> list[str]:
        async with (
            aiohttp.ClientSession(headers=headers, timeout=timeout) as http,
            http.get(f"{base_url.rstrip('/')}/models") as response,
        ):
            data = await _json(response)
        items = data.get("data") if isinstance(data, Mapping) else None
        if not isinstance(items, list):
            return []
        ids = (i.get("id") for i in items if isinstance(i, Mapping))
        return [i for i in ids if isinstance(i, str) and i]

    try:
        return await listed()
    except (aiohttp.ClientConnectionError, TimeoutError):
        return None
    except (aiohttp.ClientError, ValueError):
        return []


# -- the servers ----------------------------------------------------------------------------


def _root(base_url: str) -> str:
    """The server's root: ``http://host:8080/v1`` → ``http://host:8080``."""
    parts = urlsplit(base_url.rstrip("/"))
    return urlunsplit((parts.scheme, parts.netloc, parts.path.removesuffix("/v1"), "", ""))


async def _quietly(ask: Callable[[], Awaitable[ServerFacts]]) -> ServerFacts:
    """A question the server does not understand (404, HTML, refused) is no answer."""
    try:
        return await ask()
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError):
        return ServerFacts()


async def _json(response: aiohttp.ClientResponse) -> Any:
    if response.status != 200:
        return None
    return await response.json(content_type=None)


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def _llama_cpp(http: aiohttp.ClientSession, base_url: str) -> ServerFacts:
    async with http.get(f"{_root(base_url)}/props") as response:
        data = await _json(response)
    if not isinstance(data, Mapping):
        return ServerFacts()
    settings = data.get("default_generation_settings")
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    n_ctx = n_ctx or _positive(data.get("n_ctx"))
    modalities = data.get("modalities")
    vision = modalities.get("vision") if isinstance(modalities, Mapping) else None
    return ServerFacts(
        FoundWindow(n_ctx, "llama.cpp's /props (n_ctx)") if n_ctx else None,
        FoundPictures(vision, "llama.cpp's /props (modalities)")
        if isinstance(vision, bool)
        else None,
    )


async def _llama_cpp_python(http: aiohttp.ClientSession, base_url: str) -> ServerFacts:
    """llama-cpp-python's window, from its refusal of a prompt longer than it (only asked
    of a server that names itself so: another, Ollama say, would cut such a prompt to fit
    and read it)."""
    async with http.get(f"{_root(base_url)}/openapi.json") as response:
        data = await _json(response)
    info = data.get("info") if isinstance(data, Mapping) else None
    title = info.get("title") if isinstance(info, Mapping) else None
    if not isinstance(title, str) or LLAMA_CPP_PYTHON not in title:
        return ServerFacts()
    # "\ud800" cannot be encoded: a prompt that fits is refused before it is read
    probe = {"prompt": " a" * PROBE_TOKENS, "max_tokens": 1, "stop": ["\ud800"]}
    async with http.post(f"{_root(base_url)}/v1/completions", json=probe) as response:
        refusal = await response.text()
    window = window_from_error(refusal) if response.status == 400 else None
    if window is None:
        return ServerFacts()
    return ServerFacts(FoundWindow(window, "llama-cpp-python's refusal of a longer prompt"))


def _entry(data: Any, model: str) -> Mapping[str, Any] | None:
    """The model's entry of a ``{"data": [{"id": ...}, ...]}`` list."""
    items = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        return None
    return next((i for i in items if isinstance(i, Mapping) and i.get("id") == model), None)


# Where a model list's entry says the window: vLLM and OpenRouter (GET /v1/models), LM Studio
# (GET /api/v0/models: the loaded window first, else the model's largest).
MODEL_LIST_FIELDS = (
    ("max_model_len", "the server's model list (vLLM max_model_len)"),
    ("context_length", "the server's model list (context_length)"),
)
LM_STUDIO_FIELDS = (
    ("loaded_context_length", "LM Studio's /api/v0/models (loaded_context_length)"),
    ("max_context_length", "LM Studio's /api/v0/models (max_context_length)"),
)


async def _listed(
    http: aiohttp.ClientSession, url: str, model: str, fields: tuple[tuple[str, str], ...]
) -> ServerFacts:
    """What ``model``'s entry of the list at ``url`` says: the window in the first of
    ``fields``, and pictures as LM Studio's ``type`` or OpenRouter's input modalities."""
    async with http.get(url) as response:
        entry = _entry(await _json(response), model)
    if entry is None:
        return ServerFacts()
    window = next(
        (FoundWindow(t, source) for name, source in fields if (t := _positive(entry.get(name)))),
        None,
    )
    return ServerFacts(window, _listed_pictures(entry))


def _listed_pictures(entry: Mapping[str, Any]) -> FoundPictures | None:
    kind = entry.get("type")
    if kind in ("vlm", "llm"):
        return FoundPictures(kind == "vlm", f"LM Studio's /api/v0/models (type {kind})")
    architecture = entry.get("architecture")
    inputs = architecture.get("input_modalities") if isinstance(architecture, Mapping) else None
    if isinstance(inputs, list):
        return FoundPictures("image" in inputs, "the server's model list (input_modalities)")
    return None


async def _ollama(http: aiohttp.ClientSession, base_url: str, model: str) -> ServerFacts:
    async with http.post(f"{_root(base_url)}/api/show", json={"model": model}) as response:
        data = await _json(response)
    if not isinstance(data, Mapping) or not isinstance(data.get("model_info"), Mapping):
        return ServerFacts()
    capabilities = data.get("capabilities")
    pictures = (
        FoundPictures("vision" in capabilities, "Ollama's /api/show (capabilities)")
        if isinstance(capabilities, list)
        else None
    )
    return ServerFacts(_ollama_window(data, model), pictures)


def _ollama_window(data: Mapping[str, Any], model: str) -> FoundWindow:
    parameters = str(data.get("parameters") or "")
    match = re.search(r"^\s*num_ctx\s+(\d+)", parameters, flags=re.MULTILINE)
    if match:
        return FoundWindow(int(match.group(1)), "Ollama's /api/show (num_ctx)")
    info = data["model_info"]
    trained = next(
        (_positive(v) for k, v in info.items() if str(k).endswith(".context_length")), None
    )
    note = (
        f"Ollama serves {OLLAMA_DEFAULT} tokens to a model without num_ctx (unless the server "
        "sets OLLAMA_CONTEXT_LENGTH) and cuts longer prompts"
        + (f"; {model} supports up to {trained}: raise both to use more" if trained else "")
    )
    window = min(OLLAMA_DEFAULT, trained) if trained else OLLAMA_DEFAULT
    return FoundWindow(window, "Ollama's default window", note)
