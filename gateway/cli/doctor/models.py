"""``switchboard doctor``'s model checks: the primary model, every fallback
(``llm.fallbacks``) and every agent's own models, each asked one small request with its real
SDK, each failure explained as the chat would explain it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agent.llm.diagnose import ONBOARD
from gateway.cli.doctor.checks import Check
from gateway.config.llm import DEFAULT_URLS, KEY_VARIABLES
from gateway.core.urls import shown_url

if TYPE_CHECKING:
    from gateway.config.llm import LLMSettings
    from gateway.config.settings import Settings

PROBE_SECONDS = 25.0
__all__ = [
    "ONBOARD",
    "llm_key_check",
    "llm_reachability",
    "other_model_checks",
    "pictures_check",
    "probe_model",
]


def llm_key_check(settings: Settings, *, setting: str = "llm") -> Check:
    from agent.llm.factory import configuration_problem  # noqa: PLC0415

    llm = settings.llm
    if (problem := configuration_problem(llm, setting)) is not None:
        return Check("llm key", "fail", problem.explain())
    return Check(
        "llm key",
        "ok",
        "an API key is configured" if llm.resolved_api_key() else "no key (local server)",
    )


async def llm_reachability(settings: Settings) -> Check:
    """One small request to the primary model."""
    return await probe_model("llm", settings.llm)


async def probe_model(name: str, llm: LLMSettings, setting: str = "llm") -> Check:
    """One small request with the real SDK; a failure is explained as the chat would."""
    from agent.llm.errors import LLMError  # noqa: PLC0415
    from agent.llm.factory import create_provider  # noqa: PLC0415
    from agent.llm.types import ChatMessage, LLMRequest, SystemPrompt  # noqa: PLC0415

    where = (
        shown_url(llm.base_url)
        if llm.base_url
        else DEFAULT_URLS[llm.provider].removeprefix("https://").split("/")[0]
    )
    try:
        provider = create_provider(
            llm.model_copy(update={"max_retries": 0, "timeout_seconds": 20}), setting=setting
        )
    except LLMError as exc:
        return Check(name, "fail", exc.explain())
    request = LLMRequest(
        SystemPrompt("Reply with the single word OK."), (ChatMessage("user", "ping"),), max_tokens=8
    )
    try:
        await asyncio.wait_for(provider.complete(request), PROBE_SECONDS)
    except LLMError as exc:
        return Check(name, "fail", exc.explain())
    except TimeoutError:
        return Check(name, "fail", f"{where} did not answer a test request within 25 s")
    finally:
        await provider.aclose()
    return Check(name, "ok", f"{llm.provider} model {llm.model} at {where} answered")


def other_models(settings: Settings) -> list[tuple[str, str, LLMSettings]]:
    """Every model besides the primary, once each: (check name, setting path, settings)."""
    from gateway.runtime.agents.assembly import agent_settings  # noqa: PLC0415

    def identity(llm: LLMSettings) -> tuple[str, ...]:
        key = llm.resolved_api_key()
        return (llm.provider, llm.base_url or "", llm.model, key.get_secret_value() if key else "")

    seen = {identity(settings.llm)}
    found: list[tuple[str, str, LLMSettings]] = []

    def add(name: str, path: str, llm: LLMSettings) -> None:
        if identity(llm) not in seen:
            seen.add(identity(llm))
            found.append((name, path, llm))

    for agent in ("main", *settings.agents):
        own = agent_settings(settings, agent).llm
        prefix = "" if agent == "main" else f"agent {agent} "
        path = "llm" if agent == "main" else f"agents.{agent}"
        add(f"llm {prefix}".strip(), path, own)
        for index, fallback in enumerate(own.fallback_settings()):
            add(f"llm {prefix}fallback {index + 1}", f"{path}.fallbacks[{index}]", fallback)
    return found


async def other_model_checks(settings: Settings) -> list[Check]:
    """The fallbacks and the agents' own models, all asked at once."""
    checks: list[Check | None] = []
    probes = []
    for name, path, llm in other_models(settings):
        if llm.base_url is None and llm.resolved_api_key() is None:
            variable = KEY_VARIABLES[llm.provider]
            checks.append(
                Check(
                    name,
                    "fail",
                    f"no API key for {llm.provider} model {llm.model}: set "
                    f"{path}.api_key (or {variable}), or its base_url for a local server.",
                )
            )
            continue
        checks.append(None)
        probes.append(probe_model(name, llm, path))
    answers = iter(await asyncio.gather(*probes))
    return [c if c is not None else next(answers) for c in checks]


async def pictures_check(settings: Settings) -> list[Check]:
    """Whether the primary model sees pictures, where its server says (llama.cpp, Ollama,
    LM Studio), beside ``llm.vision``: with vision on, a model that sees none gets every
    photo refused by its server (and asked again without it)."""
    from agent.llm.server_facts import detect  # noqa: PLC0415

    llm = settings.llm
    key = llm.resolved_api_key()
    # a server that does not answer says nothing here: the model's own check tells
    facts = await detect(
        llm.provider, llm.base_url, llm.model, key.get_secret_value() if key else None
    )
    pictures = facts.pictures
    if pictures is None:
        return []
    if pictures.sees == llm.vision:
        said = "sees pictures" if pictures.sees else "sees no pictures (llm.vision = false)"
        return [Check("pictures", "ok", f"{llm.model} {said}, as {pictures.source} says")]
    if pictures.sees:
        return [
            Check(
                "pictures",
                "warn",
                f"{llm.model} sees pictures ({pictures.source}) but llm.vision is off: photos "
                "and scans reach it only as the words OCR reads off them; "
                "`switchboard config set llm.vision true` shows them",
            )
        ]
    return [
        Check(
            "pictures",
            "warn",
            f"{llm.model} sees no pictures ({pictures.source}) but llm.vision is on: its "
            "server refuses every request with a photo (then asked again without it); "
            "`switchboard config set llm.vision false` has OCR read them instead",
        )
    ]
