"""``switchboard config show|get KEY|set KEY VALUE|path``: read and change the configuration
without opening an editor.

``show`` and ``get`` print the effective values (environment, ``.env``, secret files and
config.toml merged; secrets as ``**********``). ``set`` writes config.toml, keeps its comments
and layout (tomlkit), and refuses a change that would make the configuration invalid,
naming the problem; a secret (``llm.api_key``, a channel's token: what ``doctor`` warns about
in config.toml) goes to the home's ``.env`` instead, as its ``SWITCHBOARD_*`` line. It repeats
the value it wrote with secrets masked too (the API's tokens are made with ``switchboard api
token add``, which keeps them out of the shell's history).
``path`` prints the file's path (``$EDITOR "$(switchboard config path)"``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

# Imported when a config command runs, not when the parser is built (every command and
# every shell completion builds it).
if TYPE_CHECKING:
    from pydantic import BaseModel

    from gateway.config.settings import Settings
    from gateway.core.errors import ConfigError

MASK = "**********"
DESCRIPTION = (
    "Read or change settings. `show` prints the effective configuration (every source "
    "merged, secrets masked), `get KEY` one value (`llm.model`), `set KEY VALUE` writes "
    'config.toml keeping its comments (VALUE is TOML: 42, true, ["a"]; JSON for lists and '
    "tables; or plain text; a secret such as llm.api_key goes to the home's .env instead), "
    "`path` prints where config.toml is."
)


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    command = commands.add_parser(
        "config", parents=[common], help="show, get or set settings", description=DESCRIPTION
    )
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show",
        parents=[common],
        help="the effective configuration",
        description="Print every setting as TOML (secrets masked).",
    )
    show.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    get = actions.add_parser(
        "get",
        parents=[common],
        help="one setting's value",
        description="Print one setting's effective value (secrets masked).",
    )
    get_key = get.add_argument("key", help="dotted key, e.g. llm.model")
    get_key.completer = setting_keys  # type: ignore[attr-defined]  # argcomplete's
    get.add_argument("--json", action="store_true", help="print the value as JSON")
    put = actions.add_parser(
        "set",
        parents=[common],
        help="change a setting in config.toml (a secret: in .env)",
        description=(
            "Set KEY to VALUE in config.toml, keeping comments; a secret (llm.api_key, a "
            "channel's token) in the home's .env instead; refused if invalid."
        ),
    )
    put_key = put.add_argument("key", help="dotted key, e.g. llm.model")
    put_key.completer = setting_keys  # type: ignore[attr-defined]
    put.add_argument("value", help='TOML (42, true, ["a"]), JSON or plain text')
    actions.add_parser(
        "path",
        parents=[common],
        help="where config.toml is",
        description="Print config.toml's path.",
    )
    command.set_defaults(handler=config_command, needs_settings="partial")


def setting_keys(prefix: str = "", **_: Any) -> list[str]:
    """Every dotted key of the settings' sections that starts with ``prefix``: what the
    shell completes after ``config get`` and ``config set`` (a key under a name, like
    ``agents.<name>.model``, is typed; read from the model, not the reference, which reads
    the source and takes seconds)."""
    from pydantic import BaseModel  # noqa: PLC0415

    from gateway.config.settings import Settings  # noqa: PLC0415

    def keys(model: type[BaseModel], path: str) -> list[str]:
        found = []
        for name, field in model.model_fields.items():
            inner = field.annotation
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                found += keys(inner, f"{path}{name}.")
            else:
                found.append(f"{path}{name}")
        return found

    return [key for key in keys(Settings, "") if key.startswith(prefix)]


def config_command(args: argparse.Namespace, settings: Settings) -> int:
    import tomlkit  # noqa: PLC0415

    problem: ConfigError | None = getattr(args, "config_problem", None)
    if args.action == "path":
        print(settings.config_file)
        return 0
    if args.action == "set":
        return set_value(settings, args.key, args.value)
    if args.action == "get" and problem is not None:
        invalid = _invalid(problem, settings, args.key)
        if invalid is not None:  # its own value is not valid: no default stands in for it
            print(f"switchboard: {invalid}", file=sys.stderr)
            print(running_value(settings, args.key), file=sys.stderr)
            return 2
    if problem is not None:
        print(f"switchboard: {problem}", file=sys.stderr)
        print(f"({_showing(problem)})", file=sys.stderr)
    data = _masked(settings)
    if args.action == "show":
        print(json.dumps(data, indent=2) if args.json else tomlkit.dumps(_toml_ready(data)))
        return 0 if problem is None else 2
    value = _lookup(data, args.key)
    if value is _MISSING:
        print(f"switchboard: unknown key {args.key!r}{_hint(args.key)}", file=sys.stderr)
        return 1
    if args.json or isinstance(value, dict | list):
        print(json.dumps(value, indent=None if not isinstance(value, dict) else 2))
    else:
        print("" if value is None else str(value).lower() if isinstance(value, bool) else value)
    return 0


def _invalid(problem: ConfigError, settings: Settings, key: str) -> str | None:
    """What is wrong with ``key``'s own value (or a key inside it, or the table holding
    it) in ``problem``; None when its value is valid and only others are not. A file that
    cannot be read at all holds no value that is known to be valid."""
    from gateway.cli.home import problem_keys  # noqa: PLC0415

    found = problem_keys(problem, settings.home)
    if found is None:
        return f"{key} cannot be read: {problem}"
    for dotted, what in found:
        if dotted and (
            dotted == key or dotted.startswith(f"{key}.") or key.startswith(f"{dotted}.")
        ):
            return f"{dotted} is invalid: {what}"
    return None


def running_value(settings: Settings, key: str) -> str:
    """What the running gateway uses for ``key`` (it kept its last valid configuration),
    asked over its local socket; or that none runs."""
    from gateway.cli.gateway_api import GatewayUnreachable, call, find_running  # noqa: PLC0415

    fix = f"fix it with `switchboard config set {key} VALUE` or in the file"
    running = find_running(settings)
    if running is None:
        return f"(no gateway is running, and none would start with it; {fix})"
    who = f"the running gateway (pid {running.pid})" if running.pid > 0 else "the running gateway"
    try:
        form = asyncio.run(call(settings, "GET", "api/settings"))
    except GatewayUnreachable:
        form = {}
    for section in form.get("sections", ()):
        for field in section.get("fields", ()):
            if field.get("key") == key:
                value = MASK if field.get("secret") else field.get("value") or "(unset)"
                return f"({who} uses {value}, its last valid value; {fix})"
    return f"({who} goes on with its last valid configuration; {fix})"


def _showing(problem: ConfigError) -> str:
    """What `show` prints beside a configuration error, and where to fix it."""
    from gateway.core.errors import ConfigFileUnreadable  # noqa: PLC0415

    if isinstance(problem, ConfigFileUnreadable):  # `config set` cannot edit it either
        return f"showing the defaults; fix the above in an editor: $EDITOR {problem.path}"
    return "showing the valid settings; fix the above with `switchboard config set` or in the file"


def set_value(settings: Settings, key: str, text: str) -> int:
    from pydantic import BaseModel  # noqa: PLC0415

    from gateway.config.explain import model_at  # noqa: PLC0415
    from gateway.config.settings import Settings  # noqa: PLC0415
    from gateway.config.toml.edit import parse_value  # noqa: PLC0415

    parts = key.split(".")
    parent = model_at(Settings, parts[:-1])
    if parent is None or parts[-1] not in parent.model_fields:
        print(f"switchboard: unknown key {key!r}{_hint(key)}", file=sys.stderr)
        return 1
    if isinstance(getattr(_section(settings, parts), parts[-1], None), BaseModel):
        print(f"switchboard: {key} is a table; set one of its keys", file=sys.stderr)
        return 1
    if (typo := _new_name_like_another(settings, parts)) is not None:
        print(f"switchboard: not changed, {typo}", file=sys.stderr)
        return 1
    try:
        value = parse_value(text)
    except ValueError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1
    return write_setting(settings, key, value, by="this `switchboard config set`")


def write_setting(settings: Settings, key: str, value: Any, *, by: str) -> int:
    """Write ``key`` (a known setting) into config.toml, a secret into the home's ``.env``,
    and say what became of it: a source that wins over the file, and whether the running
    gateway applied it. ``by``: how the change is named where it is refused."""
    return write_settings(settings, {key: value}, by=by)


def write_settings(settings: Settings, edits: Mapping[str, Any], *, by: str) -> int:
    """:func:`write_setting` for several keys at once: one change of the files, taken back
    as a whole when refused. A value of :data:`~gateway.config.toml.config_file.UNSET`
    takes its key out."""
    from gateway.config.env_file import DOTENV, secret_key, variable  # noqa: PLC0415
    from gateway.config.explain import model_at  # noqa: PLC0415
    from gateway.config.settings import Settings  # noqa: PLC0415
    from gateway.config.sources import describe  # noqa: PLC0415
    from gateway.config.toml.config_file import (  # noqa: PLC0415
        UNSET,
        ConfigRefused,
        change_config,
    )
    from gateway.config.toml.edit import get_key  # noqa: PLC0415
    from gateway.core.errors import ConfigFileUnreadable  # noqa: PLC0415

    path, dotenv = settings.config_file, settings.home / DOTENV
    edits = {key: normalized(key, value) for key, value in edits.items()}
    try:
        # a new file starts from the commented template; a refused change is taken back
        before, _ = change_config(settings.home, edits, by=by)
    except ValueError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return 1
    except ConfigRefused as exc:
        print(f"switchboard: not changed, {exc}", file=sys.stderr)
        return 1
    except ConfigFileUnreadable as exc:
        print(f"switchboard: not changed, {exc}; fix it in an editor first", file=sys.stderr)
        return 1
    sources = describe(settings.home)
    for key, value in edits.items():
        parts = key.split(".")
        parent = model_at(Settings, parts[:-1])
        assert parent is not None, key
        secret = secret_key(key)
        if secret:
            where = f"{dotenv} as {variable(key)}: a secret, kept out of config.toml"
            below: tuple[str, ...] = (str(path), str(dotenv), "secret file")  # .env wins
        else:
            where, below = str(path), (str(path),)
        if value is UNSET:
            print(f"{key}: taken out of {where.split(' as ')[0]} (its default applies)")
        else:
            print(f"{key} = {shown(parent, parts[-1], value, secret=secret)}  ({where})")
        if secret and get_key(before.config, key) is not None:
            print(f"moved: config.toml no longer holds {key}")
        winners = [o for o in sources.origins(tuple(parts)) if not o.startswith(below)]
        if winners:
            print(f"note: {winners[0]} sets it too and wins over the file")
    took, refused = running_gateway_took(settings, tuple(edits))
    if refused:  # valid, but the running gateway could not start with it: take it back
        before.put_back()
        print(f"switchboard: not changed, {took}", file=sys.stderr)
        return 1
    print(took)
    return 0


def normalized(key: str, value: Any) -> Any:
    """``value`` as the file should hold it: a list of ids as the list it reads as, also
    when given one id or numbers (``allow_from = ["123"]``, not ``allow_from = 123``)."""
    from enum import Enum  # noqa: PLC0415

    from pydantic import BaseModel, ValidationError  # noqa: PLC0415

    if isinstance(value, dict):
        return value
    try:
        typed = _validated(key, value)
    except (ValidationError, KeyError):
        return value  # refused by the change, naming the key
    if not isinstance(typed, list | tuple) or any(
        isinstance(item, BaseModel | dict | list | tuple) for item in typed
    ):
        return value
    return [item.value if isinstance(item, Enum) else item for item in typed]


def _validated(key: str, value: Any) -> Any:
    """``value`` read as the setting ``key`` reads it. Raises ValidationError, and KeyError
    for a key that names no setting."""
    from gateway.config.explain import model_at  # noqa: PLC0415
    from gateway.config.settings import Settings  # noqa: PLC0415

    *path, name = key.split(".")
    parent = model_at(Settings, path)
    if parent is None:
        raise KeyError(key)
    return _read_as(parent, name, value)


def _read_as(model: type[BaseModel], name: str, value: Any) -> Any:
    """``value`` read as ``model.name`` reads it, its bounds and conversions included (a
    list that takes "a,b" or one id). Raises ValidationError."""
    from typing import Annotated  # noqa: PLC0415

    from pydantic import TypeAdapter  # noqa: PLC0415

    field = model.model_fields[name]
    shape: Any = field.annotation
    if field.metadata:
        shape = Annotated[(shape, *field.metadata)]
    return TypeAdapter(shape).validate_python(value)


def shown(model: type[BaseModel], name: str, value: Any, *, secret: bool = False) -> str:
    """The value written to ``model.name`` as TOML: a secret masked (an API token's name
    and role show, not the token), every other value as it reads."""
    import tomlkit  # noqa: PLC0415
    from pydantic import ValidationError  # noqa: PLC0415

    from gateway.config.toml.edit import inline  # noqa: PLC0415

    try:
        typed = _read_as(model, name, value)
    except ValidationError:  # written though not valid alone: the environment wins
        if secret:
            return MASK
        typed = value
    rendered: str = tomlkit.item(inline(_toml_ready(_plain(typed)))).as_string()
    return rendered


RELOAD_WAIT_SECONDS = 10.0  # the gateway looks at config.toml every 2 s
RESTART_HINT = (
    "stop and start `switchboard run` (as a service: `systemctl --user restart switchboard`, "
    "or `switchboard service uninstall` and `install` again)"
)


def running_gateway_took(settings: Settings, keys: Sequence[str]) -> tuple[str, bool]:
    """What the running gateway did with the change of ``keys``: applied it, or needs a restart (it
    reloads config.toml and .env when they change and reports to data/reload.json); and whether
    it refused the configuration (it would not start with it: a channel's plug-in refusing
    its section), which the command then takes back."""
    import time  # noqa: PLC0415

    from gateway.cli.gateway_api import cluster_nodes, find_running  # noqa: PLC0415
    from gateway.runtime.reload import config_sha, read_report  # noqa: PLC0415

    running = find_running(settings)
    if running is None and (nodes := asyncio.run(cluster_nodes(settings))):
        return (
            f"the cluster's nodes ({', '.join(n.name for n in nodes)}) that share this home "
            "reload config.toml and .env within seconds; a node with a home of its own needs the change "
            "there too"
        ), False
    if running is None:
        return "no gateway is running: it takes effect when one starts", False
    who = f"the running gateway (pid {running.pid})" if running.pid > 0 else "the running gateway"
    sha = config_sha(settings.home)
    deadline = time.monotonic() + RELOAD_WAIT_SECONDS
    report = read_report(settings.data_dir)
    while report is None or report.config_sha != sha:
        if time.monotonic() > deadline:
            return (
                f"{who} did not report reloading the configuration within "
                f"{RELOAD_WAIT_SECONDS:g} s; a restart applies it for sure: {RESTART_HINT}"
            ), False
        time.sleep(0.1)  # a CLI waiting for another process's file, not a test
        report = read_report(settings.data_dir)
    if report.error is not None:
        return f"{who} would not start with it and keeps its own: {report.error}", True
    problems = "".join(f"; but {problem}" for problem in report.problems)
    if waiting := [key for key in keys if key in report.restart]:
        return f"{who} needs a restart to apply {', '.join(waiting)}: {RESTART_HINT}", False
    if any(key in report.applied for key in keys):
        return f"applied by {who}{problems}", False
    return f"{who} runs with it (nothing to change there)", False


def _masked(model: BaseModel) -> dict[str, Any]:
    """The settings as plain data, secrets masked."""
    return {name: _plain(getattr(model, name)) for name in type(model).model_fields}


def _plain(value: Any) -> Any:
    from pydantic import BaseModel, SecretStr  # noqa: PLC0415

    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, BaseModel):
        return _masked(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)  # paths


def _toml_ready(data: Any) -> Any:
    """TOML has no null: unset keys are left out of ``show``."""
    if isinstance(data, dict):
        return {k: _toml_ready(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_toml_ready(v) for v in data]
    return data


_MISSING = object()


def _lookup(data: Any, dotted: str) -> Any:
    current = data
    for part in dotted.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _hint(dotted: str) -> str:
    from gateway.config.explain import suggestion  # noqa: PLC0415
    from gateway.config.settings import Settings  # noqa: PLC0415

    return suggestion(Settings, tuple(dotted.split(".")))


def _new_name_like_another(settings: Settings, parts: list[str]) -> str | None:
    """A key under a name not configured yet (``agents.wrok.api_key``) makes a new agent,
    MCP server, webhook or person; when the name is close to one that is, it is far more
    likely a typo of it, which would quietly make a second one."""
    import difflib  # noqa: PLC0415

    current: Any = settings
    for depth, part in enumerate(parts[:-1]):
        if isinstance(current, dict):
            if part not in current:
                close = difflib.get_close_matches(part, [str(k) for k in current], n=1)
                if close:
                    table = ".".join(parts[:depth])
                    return (
                        f"there is no {table}.{part} (did you mean `{close[0]}`? "
                        f"{table} has {', '.join(map(str, current))}); a new one that close "
                        "to another is made by editing config.toml"
                    )
                return None
            current = current[part]
        else:
            current = getattr(current, part, None)
    return None


def _section(settings: Settings, parts: list[str]) -> Any:
    current: Any = settings
    for part in parts[:-1]:
        current = getattr(current, part, None)
    return current
