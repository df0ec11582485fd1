"""``switchboard onboard``: create the home, then choose the model, check it, and save it.

In a terminal it asks for the provider, base URL, model and API key, sends one test request
and writes the answers: ``[llm]`` into config.toml (comments kept) and the key into
``$SWITCHBOARD_HOME/.env`` (mode 0600), never into the shell history. ``--provider``,
``--base-url``, ``--model``, ``--api-key`` and ``--context-window`` do the same without
questions; with no flags and no terminal it creates what is missing and says which flags to
give (exit 1 when no model is configured at all, so ``make chat`` stops there). Existing files
are never overwritten, only the ``[llm]`` keys it was told are changed. A new config.toml is
written once the answers are in, not before the first question: an onboarding stopped
half-way leaves none, and ``make chat`` asks again.

For a server of one's own (a base URL), the models it lists (``GET /v1/models``) are shown
and the first is proposed (``--base-url`` without ``--model`` takes it).

The model's context window is read from its server where the server says it
(:mod:`agent.llm.server_facts`) and saved as ``llm.context_window``; where nothing tells, a
terminal is asked and the flags' user told how to set it. Where the server says whether the
model sees pictures, that is saved as ``llm.vision``: a model that sees none then gets the
words read off a photo or a scan instead of a request its server would refuse.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gateway.cli.onboard.shell_command import path_note, switchboard
from gateway.config.env_file import save_secret
from gateway.config.toml.config_file import config_text, write_config

if TYPE_CHECKING:
    from agent.llm.server_facts import FoundWindow, ServerFacts
    from gateway.config.llm import LLMSettings
    from gateway.config.settings import Settings

DESCRIPTION = (
    "Create $SWITCHBOARD_HOME (config.toml, workspace) without overwriting anything, then "
    "choose the model: in a terminal it asks for provider, base URL, model and API key, "
    "checks them with one test request and saves them. Flags do the same without questions."
)
KEY_VARIABLE = "SWITCHBOARD_LLM__API_KEY"
SHOWN_MODELS = 10  # of a server's model list (a router lists hundreds)
# Proposed for a server of one's own that does not say its window: most serve at least this
# much, and a window set too small only compacts sooner, where one too large gets prompts
# refused.
LOCAL_WINDOW = 8_192


def flags_hint() -> str:
    """How to give the model without a terminal, as this person types the command."""
    onboard = switchboard("onboard")
    return (
        "Without a terminal, give the model as flags:\n"
        f"  {onboard} --base-url http://localhost:11434/v1 --model llama3.1\n"
        f"  {onboard} --provider anthropic --model claude-sonnet-4-5 --api-key sk-ant-...\n"
        '(with make: make onboard ARGS="--base-url ... --model ...", or make onboard '
        "BASE_URL=... MODEL=... API_KEY=...)"
    )


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
    context_window: int | None = None  # given by a flag or an answer; else detected or kept
    vision: bool | None = None  # whether the model sees pictures, where its server says
    preset: int = 1  # the menu entry it came from (the default when asked again)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    from gateway.cli.onboard.channel import onboarding_channels  # noqa: PLC0415

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
    command.add_argument(
        "--context-window",
        type=int,
        metavar="TOKENS",
        help="the model's context window (default: what its server says)",
    )
    command.add_argument("--no-check", action="store_true", help="save without a test request")
    command.add_argument(
        "--non-interactive", action="store_true", help="never ask; use the flags only"
    )
    command.add_argument(
        "--channel",
        choices=onboarding_channels(),
        help="set up a chat channel instead of the model: its questions, a check, a test message",
    )
    command.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="with --channel: answer a question (token=..., allow_from=...; repeatable)",
    )
    command.add_argument(
        "--test-to",
        metavar="ID",
        help="with --channel: who gets the test message, by their id on the platform (a "
        "Telegram chat id, a Slack or Discord user id, a phone number, a Matrix id); default: "
        "the allow_from answer",
    )
    command.set_defaults(handler=onboard_command)


def onboard_command(args: argparse.Namespace, settings: Settings) -> int:
    if not args.channel and (args.set or args.test_to):  # they would be ignored
        return _without_channel("--set" if args.set else "--test-to")
    _make_home(settings)
    if args.channel:
        from gateway.cli.onboard.channel import onboard_channel  # noqa: PLC0415

        return onboard_channel(args, settings)
    given = (args.provider, args.base_url, args.model, args.api_key, args.context_window)
    flags = any(v is not None for v in given)
    terminal = sys.stdin.isatty() and sys.stdout.isatty()  # a person, not a script
    interactive = not flags and not args.non_interactive and terminal
    if not flags and not interactive:
        return _no_questions(settings)
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
        choice = ask(settings.llm, previous=choice)  # the last answers are the defaults
    try:
        choice = with_server_facts(settings, choice, interactive=interactive)
    except (EOFError, KeyboardInterrupt):
        print("\nNothing saved.")
        return 1
    save(settings, choice)
    print()
    _what_next(settings, interactive=interactive)
    return 0


def _make_home(settings: Settings) -> None:
    """The home, what is missing of it made from the templates; each file said."""
    from gateway.runtime.home import onboard  # noqa: PLC0415 - keep start-up lean

    report = onboard(settings.home, settings.workspace_dir, config=False)
    for path in report.created:
        print(f"created  {path}")
    for path in report.kept:
        print(f"kept     {path} (already there)")


def _without_channel(given: str) -> int:
    from gateway.cli.onboard.channel import onboarding_channels  # noqa: PLC0415

    print(
        f"switchboard: {given} answers a channel's setup: give --channel too "
        f"({', '.join(onboarding_channels())}); nothing done",
        file=sys.stderr,
    )
    return 2


def _what_next(settings: Settings, *, interactive: bool) -> None:
    """A chat channel offered (in a terminal), else the "Next:" lines."""
    if interactive and _offer_a_channel(settings):
        return
    _next(f"`{switchboard('chat')}` to talk here, `{switchboard('run')}` for the channels.")
    _a_channel_next(settings)


def _offer_a_channel(settings: Settings) -> bool:
    """In a terminal, with no chat channel set up yet: ask whether to set one up now, and
    do (``onboard --channel``). Whether one was set up (its own "Next:" said the rest)."""
    from gateway.cli.onboard.channel import onboard_channel, onboarding_channels  # noqa: PLC0415

    if any(section.enabled for section in settings.channel_sections().values()):
        return False
    names = onboarding_channels()
    while True:
        try:
            answer = _prompt(
                f"Reach it from your phone too? Set up {', '.join(names)} (Enter: not now)", ""
            ).lower()
        except (EOFError, KeyboardInterrupt):
            return False
        if not answer:
            return False
        if answer in names:
            break
        print(f"  one of {', '.join(names)}, or Enter")
    args = argparse.Namespace(channel=answer, set=[], test_to=None, non_interactive=False)
    if onboard_channel(args, settings) != 0:
        print(f"Set it up later: `{switchboard(f'onboard --channel {answer}')}`.")
        return False
    return True


def _next(steps: str) -> None:
    """The "Next:" line, and how to put ``switchboard`` on the PATH when it is not."""
    print(f"Next: {steps}")
    if note := path_note():
        print(note)


def _a_channel_next(settings: Settings) -> None:
    """How to reach the assistant from a phone, when no chat channel is set up yet."""
    from gateway.cli.onboard.channel import onboarding_channels  # noqa: PLC0415

    if any(section.enabled for section in settings.channel_sections().values()):
        return
    first, *others = onboarding_channels()  # the registry's order: the built-in ones first
    print(
        f"To reach it from your phone: `{switchboard(f'onboard --channel {first}')}` "
        f"(or {', '.join(others)})."
    )


def _no_questions(settings: Settings) -> int:
    """No flags, no terminal: the home is made; say how to choose the model, and fail when
    no model is configured at all (``make chat`` would start and its first message fail)."""
    from agent.llm.factory import configuration_problem  # noqa: PLC0415

    problem = configuration_problem(settings.llm)
    if problem is None:
        if not settings.config_file.exists():
            write_config(settings.config_file, config_text(settings.config_file))
            print(f"created  {settings.config_file}")
        print(f"\nModel: {settings.llm.provider} {settings.llm.model} (as configured).")
        _next(f"`{switchboard('doctor')}`, then `{switchboard('chat')}`.")
        return 0
    print(
        f"\nNo model is configured yet, and there is no terminal to ask in.\n{flags_hint()}\n"
        f"(or write [llm] in {settings.config_file} yourself, or set SWITCHBOARD_LLM__* "
        "variables)",
        file=sys.stderr,
    )
    return 1


def from_flags(args: argparse.Namespace, current: LLMSettings) -> ModelChoice:
    from gateway.config.llm import model_base_url  # noqa: PLC0415

    provider = args.provider or current.provider
    base_url = model_base_url(args.base_url, provider) if args.base_url else None
    if args.base_url is None and args.provider is None:
        base_url = current.base_url
        if base_url is not None and args.model is not None:
            print(
                f"note: keeping base URL {base_url} (configured now); give --base-url for "
                f"another server, or --provider openai for api.openai.com"
            )
    if args.context_window is not None and args.context_window < 2_048:
        raise ValueError(f"--context-window {args.context_window}: at least 2048 tokens")
    model = args.model
    if model is None and base_url is not None and base_url != current.base_url:
        model = _first_served(base_url, args.api_key)  # another server: one of its own models
    elif model is None and base_url is None and provider != current.provider:
        model = next(p.model for p in PRESETS if p.provider == provider and p.base_url is None)
    return ModelChoice(
        provider, base_url, model or current.model, args.api_key, args.context_window
    )


def _first_served(base_url: str, api_key: str | None) -> str:
    offered = served(base_url, api_key)
    if not offered:
        raise ValueError(f"give --model: no list of models came from {base_url}")
    others = f"; --model for another: {', '.join(offered[1:])}" if offered[1:] else ""
    print(f"model: {offered[0]} (the first the server lists{others})")
    return offered[0]


def served(base_url: str, api_key: str | None = None) -> list[str]:
    """The models the server at ``base_url`` lists, shown to the person (the first ten)."""
    from agent.llm.server_facts import served_models  # noqa: PLC0415

    offered = asyncio.run(served_models(base_url, api_key))
    if offered is None:  # said now, not only after the last question
        print(f"  nothing answers at {base_url}: is the model's server running there?")
        return []
    if offered:
        more = f" and {len(offered) - SHOWN_MODELS} more" if len(offered) > SHOWN_MODELS else ""
        print(f"  the server offers: {', '.join(offered[:SHOWN_MODELS])}{more}")
    return offered


def ask(current: LLMSettings, previous: ModelChoice | None = None) -> ModelChoice:
    """The questions; after a failed check, ``previous`` answers are offered as defaults
    (Enter keeps each one, the key included); on a home with a model configured already,
    that model's (Enter keeps it: running onboard again never switches by accident)."""
    from gateway.config.llm import model_base_url  # noqa: PLC0415

    configured = _configured(current) if previous is None else None
    defaults = previous or configured
    print("\nWhich model should the assistant use?")
    for number, preset in enumerate(PRESETS, start=1):
        print(f"  {number}) {preset.label}")
    answer = _prompt("Choice", str(defaults.preset if defaults else 1))
    if not answer.isdigit() or not 1 <= int(answer) <= len(PRESETS):
        raise ValueError(f"choose a number from 1 to {len(PRESETS)}")
    number = int(answer)
    preset = PRESETS[number - 1]
    same = defaults is not None and defaults.preset == number
    base_url = defaults.base_url if same and defaults is not None else preset.base_url
    while base_url is not None:
        try:
            base_url = model_base_url(_prompt("Base URL", base_url), preset.provider)
            break
        except ValueError as exc:
            print(f"  {exc}")
    offered = served(base_url) if base_url is not None else []
    if same and defaults is not None:
        default = defaults.model
    else:
        default = _model_default(preset, base_url, current, offered)
    model = ""
    while not model:
        model = _prompt("Model", default)
    if offered and model not in offered:
        print(f"  the server does not list {model}: the check below asks it anyway")
    kept = previous.api_key if same and previous is not None else None
    hint = "" if preset.needs_key else "; empty for none"
    if kept:
        hint = "; Enter keeps the one you gave"
    elif same and configured is not None and current.resolved_api_key() is not None:
        hint = "; Enter keeps the one configured"  # a key of None leaves it as it is
    key = getpass.getpass(f"API key (hidden{hint}): ") if sys.stdin.isatty() else input("API key: ")
    return ModelChoice(preset.provider, base_url, model, key.strip() or kept, preset=number)


def _configured(current: LLMSettings) -> ModelChoice | None:
    """The model configured now, as answers to the questions; ``None`` when none is."""
    from agent.llm.factory import configuration_problem  # noqa: PLC0415

    if configuration_problem(current) is not None:
        return None
    for number, preset in enumerate(PRESETS, start=1):
        if (preset.provider, preset.base_url) == (current.provider, current.base_url):
            return ModelChoice(
                current.provider, current.base_url, current.model, None, preset=number
            )
    if current.provider == "openai" and current.base_url is not None:  # a server of one's own
        return ModelChoice("openai", current.base_url, current.model, None, preset=len(PRESETS))
    return None


def _model_default(
    preset: Preset, base_url: str | None, current: LLMSettings, offered: list[str]
) -> str:
    """The model a new answer proposes: where the server lists its models (``offered``),
    the configured one when it is among them, else the first; elsewhere the configured one
    when it is for the same server, else the preset's."""
    same_server = current.provider == preset.provider and current.base_url == base_url
    if offered:
        return current.model if same_server and current.model in offered else offered[0]
    return current.model if same_server else preset.model


def with_server_facts(settings: Settings, choice: ModelChoice, *, interactive: bool) -> ModelChoice:
    """The answers with what the server says of the model: whether it sees pictures, and
    its context window (:func:`with_window`)."""
    facts = asyncio.run(detect(settings, choice))
    pictures = facts.pictures
    if pictures is not None:
        if pictures.sees:
            print(f"  pictures: the model sees them ({pictures.source})")
        else:
            print(
                f"  pictures: the model sees none ({pictures.source}); photos and scans reach "
                "it as the words Tesseract reads off them"
            )
        choice = replace(choice, vision=pictures.sees)
    return with_window(settings, choice, facts.window, interactive=interactive)


def with_window(
    settings: Settings, choice: ModelChoice, found: FoundWindow | None, *, interactive: bool
) -> ModelChoice:
    """The context window to save: the one given, else ``found`` (what the server says),
    else asked (in a terminal) or kept with a note on how to set it."""
    if choice.context_window is not None:
        return choice
    current = settings.llm.context_window
    if found is not None:
        print(f"  context window: {found.tokens} tokens ({found.source})")
        if found.note:
            print(f"  note: {found.note}")
        return replace(choice, context_window=found.tokens)
    if not interactive:
        print(
            f"  context window: the server does not say; keeping llm.context_window = "
            f"{current}. If the model's is smaller, give --context-window TOKENS (or "
            "`switchboard config set llm.context_window TOKENS`): a prompt past it is refused."
        )
        return choice
    print("  The server does not say how large the model's context window is.")
    default = current
    if choice.base_url is not None and "context_window" not in settings.llm.model_fields_set:
        default = LOCAL_WINDOW  # not the hosted models' default of 128,000
    while True:
        answer = _prompt(
            "Context window in tokens (llama.cpp --ctx-size, Ollama num_ctx)", str(default)
        )
        if answer.isdigit() and int(answer) >= 2_048:
            return replace(choice, context_window=int(answer))
        print("  a number of tokens, at least 2048")


async def detect(settings: Settings, choice: ModelChoice) -> ServerFacts:
    from agent.llm.server_facts import detect  # noqa: PLC0415

    key = choice.api_key
    if key is None:
        resolved = _llm(settings.llm, choice).resolved_api_key()
        key = resolved.get_secret_value() if resolved else None
    return await detect(choice.provider, choice.base_url, choice.model, key)


def check(settings: Settings, choice: ModelChoice) -> str | None:
    """One test request with the answers; the problem in words, or None when it answered.
    Its hints name the answers (a flag or a prompt), not the variables they would be."""
    from gateway.cli.doctor.command import llm_key_check  # noqa: PLC0415
    from gateway.cli.doctor.models import ONBOARD, probe_model  # noqa: PLC0415

    llm = _llm(settings.llm, choice)
    candidate = settings.model_copy(update={"llm": llm})
    where = choice.base_url or choice.provider
    print(f"Checking {choice.model} at {where} ...", flush=True)
    key = llm_key_check(candidate, setting=ONBOARD)
    if key.status == "fail":
        return key.message
    result = asyncio.run(probe_model("llm", llm, ONBOARD))
    if result.status != "ok":
        return result.message
    print(f"  ok: {result.message}")
    return None


def save(settings: Settings, choice: ModelChoice) -> None:
    from gateway.config.toml.edit import delete_key, set_key  # noqa: PLC0415

    path = settings.config_file
    text = config_text(path)
    text = set_key(text, "llm.provider", choice.provider)
    text = set_key(text, "llm.model", choice.model)
    if choice.base_url is None:
        text = delete_key(text, "llm.base_url")
    else:
        text = set_key(text, "llm.base_url", choice.base_url)
    saved = "provider, model, base_url"
    if choice.context_window is not None:
        text = set_key(text, "llm.context_window", choice.context_window)
        saved += ", context_window"
    if choice.vision is not None:
        text = set_key(text, "llm.vision", choice.vision)
        saved += ", vision"
    if choice.api_key is not None:
        text = delete_key(text, "llm.api_key")  # the key lives in .env from now on
    write_config(path, text)
    print(f"saved    [llm] {saved} in {path}")
    if choice.api_key is not None:
        dotenv = save_secret(settings.home, KEY_VARIABLE, choice.api_key)
        print(f"saved    {KEY_VARIABLE} in {dotenv} (mode 0600)")
    shadowed = [
        name
        for name in ("PROVIDER", "MODEL", "BASE_URL", "API_KEY", "CONTEXT_WINDOW", "VISION")
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
    if choice.context_window is not None:
        update["context_window"] = choice.context_window
    if choice.vision is not None:
        update["vision"] = choice.vision
    return LLMSettings.model_validate({**current.model_dump(), **update})


def _prompt(question: str, default: str) -> str:
    answer = input(f"{question} [{default}]: " if default else f"{question}: ").strip()
    return answer or default
