"""``switchboard onboard --channel NAME``: ask for a channel's settings, check them as
``doctor`` does, send one test message, and save them.

What to ask, how to send the test message and what to do next is the channel's
:class:`~gateway.config.plugins.Onboarding` (its plug-in's; only channels that have one can be
set up so). Secrets (tokens, the app secret, a password) go to ``$SWITCHBOARD_HOME/.env``
(mode 0600) as ``SWITCHBOARD_<CHANNEL>__<KEY>``, the rest under ``[<channel>]`` in
config.toml (comments kept). ``--set KEY=VALUE`` answers a question without asking; with
``--non-interactive`` nothing is asked at all.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import getpass
import secrets
import sys
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from gateway.cli.onboard.shell_command import path_note, switchboard
from gateway.config.env_file import save_secret
from gateway.config.plugins import ChannelPlugin, Onboarding, Question, channel_plugins
from gateway.config.toml.config_file import config_text, write_config
from gateway.core.errors import ChannelError, ConfigError

if TYPE_CHECKING:
    from gateway.config.settings import Settings


LISTS = {"allow_from", "owners", "admins"}
TEST_TEXT = "Switchboard is set up and can write to you here. Reply to talk to me."


def onboarding_channels() -> list[str]:
    """The channels ``onboard --channel`` can set up."""
    return [name for name, plugin in channel_plugins().items() if plugin.onboarding is not None]


def onboard_channel(args: argparse.Namespace, settings: Settings) -> int:
    name = str(args.channel)
    plugin = channel_plugins()[name]
    onboarding = plugin.onboarding
    assert onboarding is not None  # the parser offers only these
    answers = dict(_pairs(args.set or []))
    if (unknown := _unknown_answer(name, onboarding, getattr(settings, name), answers)) is not None:
        print(f"switchboard: {unknown}; nothing saved", file=sys.stderr)
        return 1
    interactive = not args.non_interactive and sys.stdin.isatty()
    try:
        for question in onboarding.questions:
            if question.instead_of and answers.get(question.instead_of):
                answers.pop(question.key, None)  # the other answer does: a token, no password
                continue
            if question.key not in answers and interactive:
                answers[question.key] = _ask(question)
            if question.generated and not answers.get(question.key):
                answers[question.key] = secrets.token_urlsafe(16)
        values: dict[str, Any] = {
            key: [value] if key in LISTS and value else value
            for key, value in answers.items()
            if value
        }
        if "allow_from" in values:
            values.setdefault("owners", values["allow_from"])
        candidate = _with_section(settings, name, values)
    except ValidationError as exc:  # an answer the section does not take, in one line
        said = "; ".join(
            f"{name}.{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        print(f"switchboard: {said}; nothing saved", file=sys.stderr)
        return 1
    except (ValueError, EOFError, KeyboardInterrupt) as exc:
        print(f"switchboard: {exc or 'cancelled'}; nothing saved", file=sys.stderr)
        return 1
    print(f"Checking {name} ...", flush=True)
    try:
        values = asyncio.run(_signed_in(onboarding, candidate.channel_sections()[name], values))
    except ChannelError as exc:
        return _failed(str(exc), onboarding, answers, interactive=interactive)
    candidate = _with_section(settings, name, values)
    section = candidate.channel_sections()[name]
    problem = asyncio.run(
        _check_and_greet(candidate, plugin, section, args.test_to or _first(values))
    )
    if problem is not None:
        return _failed(problem, onboarding, answers, interactive=interactive)
    _save(settings, name, onboarding, values, section)
    _next(settings, name, onboarding, section)
    return 0


def _next(settings: Settings, name: str, onboarding: Onboarding[Any], section: Any) -> None:
    """What to do next, once the answers are saved; a running gateway starts the channel
    by itself."""
    from gateway.cli.gateway_api import find_running  # noqa: PLC0415

    running = find_running(settings)
    if running is not None:  # it reloads config.toml and .env by itself
        pid = f" (pid {running.pid})" if running.pid > 0 else ""
        print(f"The running gateway{pid} starts {name} with these settings within seconds.")
    step = onboarding.next_step(section, settings.home / ".env")
    if step is not None:
        if running is not None:  # the steps begin with starting one
            step = step.replace("start `switchboard run`, ", "")
        # the commands it names, as this person can type them
        step = step.replace("`switchboard ", f"`{switchboard('').rstrip()} ")
        print(f"\nNext: `{switchboard('doctor')}`, then {step}.")
        if note := path_note():
            print(note)


def _unknown_answer(
    name: str, onboarding: Onboarding[Any], section: BaseModel, answers: dict[str, str]
) -> str | None:
    """An answer ``--set`` gave that is no setting of the channel's section, with the one
    meant, when one is close."""
    asked = [q.key for q in onboarding.questions]
    for key in answers:
        if key in asked or key in type(section).model_fields:
            continue
        close = difflib.get_close_matches(key, [*asked, *type(section).model_fields], n=1)
        meant = f"; did you mean `{close[0]}`?" if close else ""
        return f"unknown answer `{key}` for {name}{meant} (it asks for {', '.join(asked)})"
    return None


def _unanswered(name: str, onboarding: Onboarding[Any], problem: Exception) -> str | None:
    """A setting the channel cannot start without, named as onboarding takes it (``--set
    token=...``), not as the file or variable a running gateway reads it from."""
    if not isinstance(problem, ConfigError):
        return None
    for question in onboarding.questions:
        if problem.field == f"{name}.{question.key}":
            return (
                f"{problem.field} is not set: answer it with --set {question.key}=... (or run "
                "this in a terminal, which asks)"
            )
    return None


def _failed(
    problem: str, onboarding: Onboarding[Any], answers: dict[str, str], *, interactive: bool
) -> int:
    print(f"  FAIL: {problem}\nNothing saved.", file=sys.stderr)
    unanswered = [q for q in onboarding.questions if q.key not in answers]
    if unanswered and not interactive:
        print("Answers it takes (--set KEY=VALUE):", file=sys.stderr)
        for question in unanswered:
            print(f"  {question.key}: {question.text}", file=sys.stderr)
    return 1


async def _signed_in(
    onboarding: Onboarding[Any], section: Any, values: dict[str, Any]
) -> dict[str, Any]:
    """``values`` with the credentials the channel's sign-in got for the answers that are
    not saved, in their place (a Matrix password: the access token of its login)."""
    used = [q.key for q in onboarding.questions if not q.saved and q.key in values]
    if onboarding.sign_in is None or not used:
        return values
    got = await onboarding.sign_in(section)
    print(f"  ok: signed in; saving {', '.join(got)}, not {', '.join(used)}")
    return {key: value for key, value in {**values, **got}.items() if key not in used}


async def _check_and_greet(
    settings: Settings, plugin: ChannelPlugin[Any], section: Any, to: str | None
) -> str | None:
    from gateway.core.channel import SupportsProbe  # noqa: PLC0415
    from gateway.core.errors import ChannelError, ConfigError  # noqa: PLC0415

    onboarding = plugin.onboarding
    assert onboarding is not None
    try:
        channel = plugin.create(section, settings.channel_context())
        found = await channel.probe() if isinstance(channel, SupportsProbe) else "configured"
    except (ChannelError, ConfigError) as exc:
        proved = onboarding.set_up_later(exc)
        if proved is None:
            return _unanswered(plugin.name, onboarding, exc) or str(exc)
        print(f"  note: {exc} (set it up next)")  # expected before the first run
        found = proved
    print(f"  ok: {found}")
    if not to:
        return None
    try:
        where = await onboarding.greet(section, to, TEST_TEXT)
    except (ChannelError, ConfigError, OSError) as exc:
        return f"the test message to {to} failed: {exc}"
    print(f"  sent a test message to {to} ({where})")
    return None


def _with_section(settings: Settings, name: str, values: dict[str, Any]) -> Settings:
    current = getattr(settings, name)
    section = type(current).model_validate({**current.model_dump(), **values})
    return settings.model_copy(update={name: section})


def _save(
    settings: Settings,
    name: str,
    onboarding: Onboarding[Any],
    values: dict[str, Any],
    section: BaseModel,
) -> None:
    """The answers: secrets to ``.env``, the rest to config.toml as ``section`` (the
    answers validated) reads them: a port a number, a switch a boolean, a list a list."""
    from gateway.config.toml.edit import set_key  # noqa: PLC0415

    secret_keys = {q.key for q in onboarding.questions if q.secret} | {"password"}
    typed = section.model_dump(mode="json")
    path = settings.config_file
    text = config_text(path)
    for key, value in values.items():
        if key not in secret_keys:
            text = set_key(text, f"{name}.{key}", typed.get(key, value))
    write_config(path, text)
    print(f"saved    [{name}] in {path}")
    for key in sorted(secret_keys & set(values)):
        variable = f"SWITCHBOARD_{name.upper()}__{key.upper()}"
        dotenv = save_secret(settings.home, variable, str(values[key]))
        print(f"saved    {variable} in {dotenv} (mode 0600)")


def _first(values: dict[str, Any]) -> str | None:
    allowed = values.get("allow_from") or []
    return str(allowed[0]) if allowed else None


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"switchboard: --set wants KEY=VALUE, not {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def _ask(question: Question) -> str:
    if question.secret:
        return getpass.getpass(f"{question.text} (hidden): ").strip()
    answer = input(
        f"{question.text}" + (f" [{question.default}]" if question.default else "") + ": "
    )
    return answer.strip() or question.default
