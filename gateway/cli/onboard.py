"""``switchboard onboard``: create the home, then choose the model, check it, and save it.

In a terminal it asks for the provider, base URL, model and API key, sends one test request
and writes the answers: ``[llm]`` into config.toml (comments kept) and the key into
``$SWITCHBOARD_HOME/.env`` (mode 0600), never into the shell history. ``--provider``,
``--base-url``, ``--model`` and ``--api-key`` do the same without questions; with no flags
and no terminal it only creates what is missing, as before. Existing files are never
overwritten, only the ``[llm]`` keys it was told are changed.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config.llm import LLMSettings
    from gateway.config.settings import Settings

DESCRIPTION = (
    "Create $SWITCHBOARD_HOME (config.toml, workspace) without overwriting anything, then "
    "choose the model: in a terminal it asks for provider, base URL, model and API key, "
    "checks them with one test request and saves them. Flags do the same without questions."
)
KEY_VARIABLE = "SWITCHBOARD_LLM__API_KEY"


@dataclass(frozen=True, slots=True)
class Preset:
    label: str
    provider: str
    base_url: str | None
    model: str
    needs_key: bool


PRESETS = (
    Preset("OpenAI (api.openai.com; needs an API key)", "openai", None, "gpt-4o-mini", True),
    Preset("Anthropic (needs an API key)", "anthropic", None, "claude-sonnet-4-5", True),
    Preset(
        "Ollama on this machine (no key)", "openai", "http://localhost:11434/v1", "llama3.1", False
    ),
    Preset(
        "another OpenAI-compatible server (vLLM, llama.cpp, LM Studio, OpenRouter, ...)",
        "openai",
        "http://localhost:8000/v1",
        "",
        False,
    ),
)


@dataclass(frozen=True, slots=True)
class ModelChoice:
    provider: str
    base_url: str | None
    model: str
    api_key: str | None


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "onboard",
        parents=[common],
        help="create the home and choose the model (asks in a terminal)",
        description=DESCRIPTION,
    )
    command.add_argument("--provider", choices=("openai", "anthropic"), help="the API dialect")
    command.add_argument("--base-url", help="the server's root (OpenAI-compatible: its /v1)")
    command.add_argument("--model", help="model name as the server knows it")
    command.add_argument("--api-key", help="saved to $SWITCHBOARD_HOME/.env (mode 0600)")
    command.add_argument("--no-check", action="store_true", help="save without a test request")
    command.add_argument(
        "--non-interactive", action="store_true", help="never ask; use the flags only"
    )
    command.add_argument(
        "--channel",
        choices=("whatsapp", "matrix"),
        help="set up a chat channel instead of the model: its questions, a check, a test message",
    )
    command.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="with --channel: answer a question"
    )
    command.add_argument("--test-to", help="with --channel: who gets the test message")
    command.set_defaults(handler=onboard_command)


def onboard_command(args: argparse.Namespace, settings: Settings) -> int:
    from gateway.runtime.home import onboard  # noqa: PLC0415 - keep start-up lean

    report = onboard(settings.home, settings.workspace_dir)
    for path in report.created:
        print(f"created  {path}")
    for path in report.kept:
        print(f"kept     {path} (already there)")
    if args.channel:
        from gateway.cli.onboard_channel import onboard_channel  # noqa: PLC0415

        return onboard_channel(args, settings)
    flags = any(v is not None for v in (args.provider, args.base_url, args.model, args.api_key))
    terminal = sys.stdin.isatty() and sys.stdout.isatty()  # a person, not a script
    interactive = not flags and not args.non_interactive and terminal
    if not flags and not interactive:
        print(
            f"\nNext: choose the model with `switchboard onboard` in a terminal (or edit "
            f"{settings.config_file}, or set SWITCHBOARD_LLM__* variables), then run "
            "`switchboard doctor` and `switchboard chat`."
        )
        return 0
    try:
        choice = ask(settings.llm) if interactive else from_flags(args, settings.llm)
    except ValueError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 2
    except (EOFError, KeyboardInterrupt):
        print("\nNothing saved.")
        return 1
    while not args.no_check:
        problem = check(settings, choice)
        if problem is None:
            break
        print(f"  FAIL: {problem}")
        if not interactive:
            print("Nothing saved (use --no-check to save anyway).", file=sys.stderr)
            return 1
        again = _prompt("Try other answers? [Y/n/s = save anyway]", "y").lower()
        if again.startswith("s"):
            break
        if again.startswith("n"):
            print("Nothing saved.")
            return 1
        choice = ask(settings.llm)
    save(settings, choice)
    print("\nNext: `switchboard chat` to talk here, `switchboard run` for the channels.")
    return 0


def from_flags(args: argparse.Namespace, current: LLMSettings) -> ModelChoice:
    from gateway.config.llm import model_base_url  # noqa: PLC0415

    provider = args.provider or current.provider
    base_url = model_base_url(args.base_url, provider) if args.base_url else None
    if args.base_url is None and args.provider is None:
        base_url = current.base_url
    return ModelChoice(provider, base_url, args.model or current.model, args.api_key)


def ask(current: LLMSettings) -> ModelChoice:
    from gateway.config.llm import model_base_url  # noqa: PLC0415

    print("\nWhich model should the assistant use?")
    for number, preset in enumerate(PRESETS, start=1):
        print(f"  {number}) {preset.label}")
    answer = _prompt("Choice", "1")
    if not answer.isdigit() or not 1 <= int(answer) <= len(PRESETS):
        raise ValueError(f"choose a number from 1 to {len(PRESETS)}")
    preset = PRESETS[int(answer) - 1]
    base_url = preset.base_url
    while base_url is not None:
        try:
            base_url = model_base_url(_prompt("Base URL", base_url), preset.provider)
            break
        except ValueError as exc:
            print(f"  {exc}")
    model = ""
    while not model:
        model = _prompt("Model", preset.model or current.model)
    hint = "" if preset.needs_key else "; empty for none"
    key = getpass.getpass(f"API key (hidden{hint}): ") if sys.stdin.isatty() else input("API key: ")
    return ModelChoice(preset.provider, base_url, model, key.strip() or None)


def check(settings: Settings, choice: ModelChoice) -> str | None:
    """One test request with the answers; the problem in words, or None when it answered."""
    from gateway.cli.doctor import llm_key_check, llm_reachability  # noqa: PLC0415

    llm = _llm(settings.llm, choice)
    candidate = settings.model_copy(update={"llm": llm})
    where = choice.base_url or choice.provider
    print(f"Checking {choice.model} at {where} ...", flush=True)
    key = llm_key_check(candidate)
    if key.status == "fail":
        return key.message
    result = asyncio.run(llm_reachability(candidate))
    if result.status != "ok":
        return result.message
    print(f"  ok: {result.message}")
    return None


def save(settings: Settings, choice: ModelChoice) -> None:
    from dotenv import set_key as set_dotenv_key  # noqa: PLC0415

    from gateway.cli.tomledit import delete_key, set_key  # noqa: PLC0415

    path = settings.config_file
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    text = set_key(text, "llm.provider", choice.provider)
    text = set_key(text, "llm.model", choice.model)
    if choice.base_url is None:
        text = delete_key(text, "llm.base_url")
    else:
        text = set_key(text, "llm.base_url", choice.base_url)
    if choice.api_key is not None:
        text = delete_key(text, "llm.api_key")  # the key lives in .env from now on
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    print(f"saved    [llm] provider, model, base_url in {path}")
    if choice.api_key is not None:
        dotenv = settings.home / ".env"
        dotenv.touch(mode=0o600, exist_ok=True)
        dotenv.chmod(0o600)
        set_dotenv_key(dotenv, KEY_VARIABLE, choice.api_key, quote_mode="always")
        print(f"saved    {KEY_VARIABLE} in {dotenv} (mode 0600)")
    shadowed = [
        name
        for name in ("PROVIDER", "MODEL", "BASE_URL", "API_KEY")
        if f"SWITCHBOARD_LLM__{name}" in os.environ
    ]
    for name in shadowed:
        print(f"note: SWITCHBOARD_LLM__{name} is set in this environment and wins over the file")


def _llm(current: LLMSettings, choice: ModelChoice) -> LLMSettings:
    from gateway.config.llm import LLMSettings  # noqa: PLC0415

    update: dict[str, object] = {
        "provider": choice.provider,
        "model": choice.model,
        "base_url": choice.base_url,
    }
    if choice.api_key is not None:
        update["api_key"] = choice.api_key
    return LLMSettings.model_validate({**current.model_dump(), **update})


def _prompt(question: str, default: str) -> str:
    answer = input(f"{question} [{default}]: ").strip()
    return answer or default
