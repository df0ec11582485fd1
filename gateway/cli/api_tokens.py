"""``switchboard api token add NAME --role ROLE | list | remove NAME``: the API's clients
(``[api] tokens``, docs/connect.md) without writing a token by hand.

``add`` makes a strong random token and prints it once, alone on stdout
(``TOKEN=$(switchboard api token add ci)`` works); nothing shows it again (``list`` and
``config show`` give names and roles). The tokens are kept where secrets are kept: together,
as ``SWITCHBOARD_API__TOKENS`` (JSON) in ``$SWITCHBOARD_HOME/.env``, mode 0600, never in
config.toml or the shell's history. That line wins over config.toml's ``[api] tokens``, so
tokens found there are moved into it. Tokens set by an environment variable or a secret file
belong to whoever set those (a service unit, a container): the command names the source and
changes nothing. A change that would stop the gateway from starting (removing the last token
while the API is on) is refused, and the files stay as they were.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.cli.onboard.shell_command import switchboard
from gateway.core.principal import Role

if TYPE_CHECKING:
    from pydantic import ValidationError

    from gateway.config.connect import ApiToken
    from gateway.config.settings import Settings
    from gateway.core.errors import ConfigError

VARIABLE = "SWITCHBOARD_API__TOKENS"
TABLE_VARIABLE = "SWITCHBOARD_API"  # the whole [api] table as JSON
TOKEN_BYTES = 32  # 43 URL-safe characters
DESCRIPTION = (
    "The tokens of the OpenAI-compatible API and the task API (docs/connect.md). `add NAME "
    "--role ROLE` creates a random token and prints it once, `list` names the tokens and "
    "their roles, `remove NAME` withdraws one. They are kept in $SWITCHBOARD_HOME/.env "
    "(mode 0600)."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "api",
        parents=[common],
        help="the API's tokens (add, list, remove)",
        description=DESCRIPTION,
    )
    things = command.add_subparsers(dest="thing", required=True, metavar="THING")
    token = things.add_parser(
        "token",
        parents=[common],
        help="add, list or remove API tokens",
        description="Add, list or remove the API's tokens: " + DESCRIPTION,
    )
    actions = token.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser(
        "add",
        parents=[common],
        help="create a token and print it once",
        description="Create a random token for a client named NAME, keep it in .env and "
        "print it once; nothing shows it again.",
    )
    add.add_argument("name", help="the client: up to 32 lower-case letters, digits, - and _")
    add.add_argument(
        "--role",
        choices=[role.value for role in Role],
        default=Role.MEMBER.value,
        help="what the client may do, as a person of that role in a chat (default: member)",
    )
    listing = actions.add_parser(
        "list",
        parents=[common],
        help="the tokens' names and roles",
        description="Print each API token's name and role (never the token).",
    )
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    remove = actions.add_parser(
        "remove",
        parents=[common],
        help="withdraw a token",
        description="Remove the token named NAME: its client is refused from then on.",
    )
    remove.add_argument("name", help="the token's name (as `api token list` shows it)")
    command.set_defaults(handler=api_command, needs_settings="partial")


class TokenError(Exception):
    """Why the tokens cannot be changed (or read); said to the person as it is."""


@dataclass(frozen=True, slots=True)
class Kept:
    """The tokens as kept now, and the files they are written back to."""

    tokens: tuple[ApiToken, ...]
    dotenv: Path
    dotenv_name: str  # the line's variable as spelled there (VARIABLE when there is none)
    dotenv_text: str | None  # .env before the change (None: no file), to put back
    config_text: str  # config.toml before the change, to put back
    in_config: bool  # config.toml holds tokens: moved to .env (or hidden by it)
    in_dotenv: bool


def api_command(args: argparse.Namespace, settings: Settings) -> int:
    problem: ConfigError | None = getattr(args, "config_problem", None)
    if args.action == "list":
        return list_tokens(settings, problem, as_json=args.json)
    try:
        kept = read_kept(settings)
        if args.action == "add":
            return add_token(settings, kept, args.name, Role(args.role), problem)
        return remove_token(settings, kept, args.name, problem)
    except TokenError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1


def list_tokens(settings: Settings, problem: ConfigError | None, *, as_json: bool) -> int:
    if problem is not None:
        print(f"switchboard: {problem}", file=sys.stderr)
    tokens = [{"name": t.name, "role": t.role.value} for t in settings.api.tokens]
    if as_json:
        print(json.dumps(tokens, indent=2))
        return 0
    if not tokens:
        print("no API tokens: `switchboard api token add NAME --role ROLE` creates one")
    width = max((len(t["name"]) for t in tokens), default=0)
    for token in tokens:
        print(f"{token['name']:<{width}}  {token['role']}")
    if tokens and not settings.api.enabled:
        print("(the API is off: `switchboard config set api.enabled true` turns it on)")
    return 0


def add_token(
    settings: Settings, kept: Kept, name: str, role: Role, problem: ConfigError | None
) -> int:
    from pydantic import SecretStr, ValidationError  # noqa: PLC0415

    from gateway.config.connect import ApiToken  # noqa: PLC0415

    if any(t.name == name for t in kept.tokens):
        raise TokenError(
            f"there is a token named {name!r} already: `switchboard api token remove {name}` "
            "first to replace it, or choose another name"
        )
    try:
        token = ApiToken(name=name, token=SecretStr(secrets.token_urlsafe(TOKEN_BYTES)), role=role)
    except ValidationError as exc:  # the name: its message names it
        raise TokenError("; ".join(_messages(exc))) from exc
    after = _keep(settings, kept, (*kept.tokens, token), problem)
    print(
        f"API token {name!r} (role {role.value}). It is shown this once; give it to the "
        "client now (as its bearer token, or the OpenAI SDK's api_key):\n",
        file=sys.stderr,
        flush=True,
    )
    print(token.token.get_secret_value(), flush=True)
    print(file=sys.stderr)
    _saved(kept)
    if after is not None and not after.api.enabled:
        command = switchboard("config set api.enabled true")
        print(f"Next: `{command}` turns the API on.", file=sys.stderr)
    elif after is not None:
        print(_running(settings), file=sys.stderr)
    return 0


def remove_token(settings: Settings, kept: Kept, name: str, problem: ConfigError | None) -> int:
    remaining = tuple(t for t in kept.tokens if t.name != name)
    if len(remaining) == len(kept.tokens):
        names = ", ".join(t.name for t in kept.tokens) or "none"
        raise TokenError(f"no token is named {name!r} (the tokens: {names})")
    if not remaining and settings.api.enabled:
        raise TokenError(
            f"{name!r} is the API's last token and the API is on, which needs one: "
            "`switchboard config set api.enabled false` first, or add another token"
        )
    _keep(settings, kept, remaining, problem)
    print(f"removed  API token {name!r}")
    _saved(kept)
    if settings.api.enabled:
        print(_running(settings))
    return 0


def read_kept(settings: Settings) -> Kept:
    """The tokens this command keeps: the ``.env`` line's, else config.toml's. Raises
    :class:`TokenError` when another source sets them, or they cannot be read."""
    from pydantic import TypeAdapter, ValidationError  # noqa: PLC0415

    from gateway.config.connect import ApiToken  # noqa: PLC0415
    from gateway.config.sources import describe  # noqa: PLC0415
    from gateway.config.toml.edit import get_key  # noqa: PLC0415

    sources = describe(settings.home)
    if (fixed := _fixed_source(settings.home)) is not None:
        raise TokenError(
            f"the API tokens are set by {fixed}, which wins over the files this command "
            "writes: change them there (docs/connect.md)"
        )
    dotenv_name = next((k for k in sources.dotenv if k.upper() == VARIABLE), None)
    path = settings.config_file
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    in_config = get_key(text, "api.tokens")
    try:
        if dotenv_name is not None:
            where = f"{VARIABLE} in {sources.dotenv_file}"
            raw = json.loads(sources.dotenv[dotenv_name] or "[]")
        else:
            where = f"api.tokens in {path}"
            raw = [] if in_config is None else in_config.unwrap()
        tokens = TypeAdapter(tuple[ApiToken, ...]).validate_python(raw)
    except json.JSONDecodeError as exc:
        raise TokenError(f"{where} is not JSON ({exc.msg}); fix or remove that line") from exc
    except ValidationError as exc:
        raise TokenError(f"{where} cannot be read: {_problems(exc)}") from exc
    dotenv = sources.dotenv_file
    return Kept(
        tokens=tokens,
        dotenv=dotenv,
        dotenv_name=dotenv_name or VARIABLE,
        dotenv_text=dotenv.read_text(encoding="utf-8") if dotenv.exists() else None,
        config_text=text,
        in_config=in_config is not None,
        in_dotenv=dotenv_name is not None,
    )


def _fixed_source(home: Path) -> str | None:
    """An environment variable or secret file that sets the tokens (or the whole ``[api]``
    table, as the ``.env`` may too): what this command must not write around."""
    from gateway.config.sources import describe  # noqa: PLC0415

    sources = describe(home)
    names = {VARIABLE, TABLE_VARIABLE}
    for key in sources.environ:
        if key.upper() in names:
            return f"environment variable {key}"
    try:
        files = sorted(sources.secrets_dir.iterdir())
    except OSError:
        files = []
    for path in files:
        if path.name.upper() in names:
            return f"secret file {path}"
    for key in sources.dotenv:
        if key.upper() == TABLE_VARIABLE:
            return f"{key} in {sources.dotenv_file} (the whole [api] table as JSON)"
    return None


def _keep(
    settings: Settings, kept: Kept, tokens: tuple[ApiToken, ...], problem: ConfigError | None
) -> Settings | None:
    """Write ``tokens`` as the ``.env`` line (config.toml's moved into it), then load the
    configuration: a change that makes it fail is undone and refused. Returns the settings
    as they load now (None when they did not load before either)."""
    from gateway.config.env_file import save_secret  # noqa: PLC0415
    from gateway.config.settings import load_settings  # noqa: PLC0415
    from gateway.config.toml.config_file import write_config  # noqa: PLC0415
    from gateway.config.toml.edit import delete_key  # noqa: PLC0415
    from gateway.core.errors import ConfigError  # noqa: PLC0415

    entries = [
        {"name": t.name, "token": t.token.get_secret_value(), "role": t.role.value} for t in tokens
    ]
    save_secret(settings.home, kept.dotenv_name, json.dumps(entries))
    if kept.in_config and not kept.in_dotenv:
        write_config(settings.config_file, delete_key(kept.config_text, "api.tokens"))
    try:
        return load_settings()
    except ConfigError as exc:
        if problem is not None:  # it did not load before either: not this change's doing
            print(f"note: the configuration still does not load: {exc}", file=sys.stderr)
            return None
        _put_back(settings, kept)
        raise TokenError(f"nothing changed: {exc}") from exc


def _put_back(settings: Settings, kept: Kept) -> None:
    from gateway.config.toml.config_file import write_config  # noqa: PLC0415
    from gateway.core.system.fileutil import write_atomic  # noqa: PLC0415

    if kept.dotenv_text is None:
        kept.dotenv.unlink(missing_ok=True)
    else:
        write_atomic(kept.dotenv, kept.dotenv_text, mode=0o600)
    if kept.in_config and not kept.in_dotenv:
        write_config(settings.config_file, kept.config_text)


def _saved(kept: Kept) -> None:
    print(f"saved    {kept.dotenv_name} in {kept.dotenv} (mode 0600)", file=sys.stderr)
    if kept.in_config and not kept.in_dotenv:
        print(
            "moved    the tokens of config.toml's [api] there too (the .env line wins over "
            "config.toml, and tokens are secrets)",
            file=sys.stderr,
        )
    elif kept.in_config:
        print(
            f"note: config.toml's api.tokens are hidden by the {kept.dotenv_name} line; "
            "remove them from config.toml",
            file=sys.stderr,
        )


def _running(settings: Settings) -> str:
    from gateway.cli.config import RESTART_HINT  # noqa: PLC0415
    from gateway.cli.gateway_api import find_running  # noqa: PLC0415

    running = find_running(settings)
    if running is None:
        return "no gateway is running: the change takes effect when one starts"
    return f"the running gateway (pid {running.pid}) needs a restart for it: {RESTART_HINT}"


def _problems(exc: ValidationError) -> str:
    """A validation error's messages, each with its place, without the input (which would
    be a token)."""
    places = (".".join(str(p) for p in error["loc"]) or "value" for error in exc.errors())
    return "; ".join(
        f"{place}: {message}" for place, message in zip(places, _messages(exc), strict=True)
    )


def _messages(exc: ValidationError) -> list[str]:
    return [error["msg"].removeprefix("Value error, ") for error in exc.errors()]
