"""``switchboard onboard --channel whatsapp|matrix``: ask for a channel's settings, check them
as ``doctor`` does, send one test message, and save them.

Secrets (tokens, the app secret, a password) go to ``$SWITCHBOARD_HOME/.env`` (mode 0600) as
``SWITCHBOARD_<CHANNEL>__<KEY>``, the rest under ``[<channel>]`` in config.toml (comments
kept). The test message: on WhatsApp Meta's ``hello_world`` template (every business account
has it, and only a template may open a conversation); on Matrix a new unencrypted direct
room with the person, holding one line. ``--set KEY=VALUE`` answers a question without
asking; with ``--non-interactive`` nothing is asked at all.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import importlib
import secrets
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.cli.home_files import config_text, save_secret, write_config
from gateway.cli.shell_command import path_note, switchboard

if TYPE_CHECKING:
    from gateway.config.settings import Settings


@dataclass(frozen=True, slots=True)
class Question:
    key: str
    text: str
    secret: bool = False
    default: str = ""


QUESTIONS = {
    "whatsapp": (
        Question("access_token", "Access token (system user, whatsapp_business_messaging)", True),
        Question("phone_number_id", "Phone number ID (WhatsApp > API Setup)"),
        Question("app_secret", "App secret (App settings > Basic)", True),
        Question("verify_token", "Verify token for the webhook (empty: a random one)", True),
        Question("allow_from", "Your WhatsApp number (country code, digits only)"),
    ),
    "matrix": (
        Question("homeserver", "Homeserver URL", default="https://matrix.org"),
        Question("user_id", "The bot's Matrix id (@name:server)"),
        Question("access_token", "The bot's access token", True),
        Question("allow_from", "Your own Matrix id (@you:server)"),
    ),
}
LISTS = {"allow_from", "owners", "admins"}
TEST_TEXT = "Switchboard is set up and can write to you here. Reply to talk to me."


def onboard_channel(args: argparse.Namespace, settings: Settings) -> int:
    name = str(args.channel)
    answers = dict(_pairs(args.set or []))
    interactive = not args.non_interactive and sys.stdin.isatty()
    try:
        for question in QUESTIONS[name]:
            if question.key not in answers and interactive:
                answers[question.key] = _ask(question)
        if name == "whatsapp" and not answers.get("verify_token"):
            answers["verify_token"] = secrets.token_urlsafe(16)
        values: dict[str, Any] = {
            key: [value] if key in LISTS and value else value
            for key, value in answers.items()
            if value
        }
        if "allow_from" in values:
            values.setdefault("owners", values["allow_from"])
        candidate = _with_section(settings, name, values)
    except (ValueError, EOFError, KeyboardInterrupt) as exc:
        print(f"switchboard: {exc or 'cancelled'}; nothing saved", file=sys.stderr)
        return 1
    print(f"Checking {name} ...", flush=True)
    problem = asyncio.run(_check_and_greet(candidate, name, args.test_to or _first(values)))
    if problem is not None:
        print(f"  FAIL: {problem}\nNothing saved.", file=sys.stderr)
        return 1
    _save(settings, name, values)
    if name == "whatsapp":
        path = candidate.whatsapp.webhook_path
        print(
            f"\nNext: make https://<your host>{path} reach this gateway's web server, set it as "
            "the callback URL in the app's WhatsApp > Configuration with the verify token "
            f"(in {settings.home / '.env'}), subscribe to 'messages', then "
            f"`{switchboard('doctor')}`."
        )
        if note := path_note():
            print(note)
    return 0


async def _check_and_greet(settings: Settings, name: str, to: str | None) -> str | None:
    from channels import REGISTRY  # noqa: PLC0415
    from gateway.core.errors import ChannelError, ConfigError  # noqa: PLC0415

    module, _, attr = REGISTRY[name].partition(":")
    try:
        channel = getattr(importlib.import_module(module), attr)(settings)
        found = await channel.probe()
    except (ChannelError, ConfigError) as exc:
        if name == "whatsapp" and "webhook" in str(exc):
            print(f"  note: {exc} (set it up next)")  # expected before the first run
            found = "token and phone number id ok"
        else:
            return str(exc)
    print(f"  ok: {found}")
    if not to:
        return None
    try:
        where = await _greet(settings, name, to)
    except (ChannelError, ConfigError, OSError) as exc:
        return f"the test message to {to} failed: {exc}"
    print(f"  sent a test message to {to} ({where})")
    return None


async def _greet(settings: Settings, name: str, to: str) -> str:
    if name == "whatsapp":
        from channels.whatsapp.errors import channel_error  # noqa: PLC0415
        from channels.whatsapp.graph import GraphClient, GraphError, GraphUnreachable  # noqa: PLC0415

        section = settings.whatsapp
        assert section.access_token and section.phone_number_id
        graph = GraphClient(
            section.base_url,
            section.access_token.get_secret_value().strip(),
            phone_number_id=section.phone_number_id,
        )
        template = {"name": "hello_world", "language": {"code": "en_US"}}
        try:
            return await graph.send({"to": to, "type": "template", "template": template})
        except (GraphError, GraphUnreachable) as exc:
            raise channel_error(exc) from exc
        finally:
            await graph.close()
    from channels.matrix.greet import greet  # noqa: PLC0415

    return await greet(settings.matrix, to, TEST_TEXT)


def _with_section(settings: Settings, name: str, values: dict[str, Any]) -> Settings:
    current = getattr(settings, name)
    section = type(current).model_validate({**current.model_dump(), **values})
    return settings.model_copy(update={name: section})


def _save(settings: Settings, name: str, values: dict[str, Any]) -> None:
    from gateway.cli.tomledit import set_key  # noqa: PLC0415

    secret_keys = {q.key for q in QUESTIONS[name] if q.secret} | {"password"}
    path = settings.config_file
    text = config_text(path)
    for key, value in values.items():
        if key not in secret_keys:
            text = set_key(text, f"{name}.{key}", value)
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
