"""Channels are plug-ins: each one registers a :class:`ChannelPlugin` here, and the kernel
knows no platform by name.

A plug-in is a module that exposes ``PLUGIN`` and imports no platform SDK (the settings
load it at every start): its name (the ``[name]`` section and ``SWITCHBOARD_NAME__*``), its
section's settings model, and a ``create`` that imports the SDK and builds the channel only
when the channel is on. What a platform does differently and depends on its configured
values (the ports it listens on, how old an account is, older speech keys) is a method of
its section (:class:`gateway.config.channels.ChannelSection`); how ``switchboard onboard
--channel`` sets it up is its :class:`Onboarding`.

The registry is the built-in channels below plus every entry point of the group
``switchboard.channels`` in the installed packages, each naming a plug-in object::

    [project.entry-points."switchboard.channels"]
    sms = "switchboard_sms.plugin:PLUGIN"

It is read once per process, before the settings are (the settings root has a field per
channel): a package installed later takes effect at the next start.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, create_model

from gateway.config.channels import ChannelSection
from gateway.core.channel import Channel, ChannelContext
from gateway.core.errors import ConfigError

ENTRY_POINT_GROUP = "switchboard.channels"
# The channels that come with Switchboard, in the order the configuration reference lists them.
BUILT_IN = (
    "channels.telegram.plugin",
    "channels.discord.plugin",
    "channels.slack.plugin",
    "channels.whatsapp.plugin",
    "channels.matrix.plugin",
    "channels.signal.plugin",
    "channels.irc.plugin",
    "channels.email.plugin",
)
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")

S = TypeVar("S", bound=ChannelSection)


@dataclass(frozen=True, slots=True)
class Question:
    """One question of ``switchboard onboard --channel``: the answer sets ``[<channel>] key``."""

    key: str
    text: str
    secret: bool = False  # asked hidden, saved to .env
    default: str = ""
    generated: bool = False  # left empty: a random value (a token the person invents)
    instead_of: str = ""  # asked (and taken) only when this other question's answer is empty
    saved: bool = True  # False: only for the sign-in (a password traded for a token)


@dataclass(frozen=True, slots=True)
class Onboarding(Generic[S]):
    """How ``switchboard onboard --channel NAME`` sets the channel up: the questions, then
    the channel's own probe, then one test message to the person it names."""

    questions: tuple[Question, ...]
    # Send ``text`` to ``to`` as a first message on the platform; returns where it went.
    greet: Callable[[S, str, str], Awaitable[str]]
    # What a failed probe still proved when what failed is set up after onboarding (a
    # webhook the platform cannot reach yet), or None for a real failure.
    set_up_later: Callable[[Exception], str | None] = lambda exc: None
    # What to do next, once the settings are saved (``env_file``: where the secrets went).
    next_step: Callable[[S, Path], str | None] = lambda section, env_file: None
    # Before the check, when a question that is not ``saved`` was answered: trade the
    # section's credentials for lasting ones, returned as settings saved in their place
    # (Matrix logs in once with the password and keeps the access token and device it
    # got). Raises a ChannelError when the platform refuses.
    sign_in: Callable[[S], Awaitable[Mapping[str, str]]] | None = None


def pair_to_own(write: str) -> Callable[[ChannelSection, Path], str | None]:
    """The next step of a channel whose owner was not named: ``write`` to the bot (the
    platform's way: "DM your bot") and approve the pairing code it answers with as one's
    own. ``None`` once the section names an owner."""

    def next_step(section: ChannelSection, env_file: Path) -> str | None:
        if section.owners:
            return None
        return (
            f"start `switchboard run`, {write}, and approve the pairing code it answers with "
            "`switchboard pairing approve CODE --owner` (you are its owner from then on)"
        )

    return next_step


@dataclass(frozen=True, slots=True)
class ChannelPlugin(Generic[S]):
    """A chat channel, as the gateway knows it (see the module's docstring)."""

    name: str  # the section [name], SWITCHBOARD_NAME__*, and the channel of its messages
    title: str  # how a sentence names it: Telegram, email
    settings: type[S]  # its section: a ChannelSection (or LiveChannelSection) subclass
    # Build the channel from its section (only called when the section is enabled); the
    # place to import the platform's SDK. Raises ConfigError for what the section lacks.
    create: Callable[[S, ChannelContext], Channel]
    onboarding: Onboarding[S] | None = None
    loggers: tuple[str, ...] = ()  # its SDK's chatty loggers: kept at warning and above
    # The shapes of its platform's credentials (regular expressions): hidden in every log
    # line, trace and tool result, whether or not they are this gateway's own.
    token_patterns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Registry:
    """The channels this process knows (read once: :func:`registry`)."""

    plugins: Mapping[str, ChannelPlugin[Any]]
    # Installed plug-ins that could not be registered, and why: loading the settings fails
    # on them (a broken package never crashes the import of the settings themselves).
    problems: tuple[ConfigError, ...] = ()


def channel_plugins() -> Mapping[str, ChannelPlugin[Any]]:
    """Every registered channel by name: the built-in ones, then the installed packages'."""
    return registry().plugins


def token_patterns() -> tuple[str, ...]:
    """The credential shapes of every registered channel (for the log redactor)."""
    return tuple(p for plugin in channel_plugins().values() for p in plugin.token_patterns)


@cache
def registry() -> Registry:
    """The built-in channels (a broken one is a bug: it raises), then the entry points'."""
    found: dict[str, ChannelPlugin[Any]] = {}
    for module in BUILT_IN:
        _register(found, importlib.import_module(module).PLUGIN, f"module {module}")
    problems = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        origin = f"entry point {point.name} = {point.value}" + (
            f" of {point.dist.name}" if point.dist is not None else ""
        )
        try:
            plugin = point.load()
        except Exception as exc:
            problems.append(
                ConfigError(
                    f"the channel plug-in {origin} failed to load: {type(exc).__name__}: {exc}",
                    field=point.name,
                )
            )
            continue
        try:
            _register(found, plugin, origin, entry_point=point.name)
        except ConfigError as exc:
            problems.append(exc)
    return Registry(found, tuple(problems))


def _register(
    found: dict[str, ChannelPlugin[Any]],
    plugin: object,
    origin: str,
    *,
    entry_point: str | None = None,
) -> None:
    if not isinstance(plugin, ChannelPlugin):
        raise ConfigError(
            f"the {origin} is not a channel plug-in (gateway.config.plugins.ChannelPlugin)",
            field=entry_point,
        )
    if entry_point is not None and plugin.name != entry_point:
        raise ConfigError(
            f"the {origin} names the channel {plugin.name!r}: name the entry point so",
            field=entry_point,
        )
    if not _NAME.match(plugin.name):
        raise ConfigError(
            f"the {origin} names its channel {plugin.name!r}: a channel's name is up to 32 "
            "lower-case letters, digits and _, starting with a letter",
            field=plugin.name,
        )
    if plugin.name in found:
        raise ConfigError(
            f"two channel plug-ins are named {plugin.name!r} (the second is the {origin})",
            field=plugin.name,
        )
    if not (isinstance(plugin.settings, type) and issubclass(plugin.settings, ChannelSection)):
        raise ConfigError(
            f"the {origin}'s settings are not a ChannelSection (gateway.config.channels)",
            field=plugin.name,
        )
    found[plugin.name] = plugin


def channel_sections_model(base: type[BaseModel], taken: set[str]) -> type[BaseModel]:
    """A model with one field per registered channel (its section, defaults unless set), on
    ``base``; ``taken``: the names the settings root uses itself (a plug-in named so is left
    out, and reported by :func:`plugin_problems`)."""
    fields: dict[str, Any] = {
        name: (plugin.settings, plugin.settings())
        for name, plugin in channel_plugins().items()
        if name not in taken
    }
    return create_model("ChannelSections", __base__=base, **fields)


def plugin_problems(taken: set[str]) -> list[ConfigError]:
    """Why installed plug-ins could not be registered (``taken``: as for
    :func:`channel_sections_model`)."""
    clashes = [
        ConfigError(
            f"the channel plug-in {name!r} is named like the settings' own [{name}]: "
            "a channel needs a name of its own",
            field=name,
        )
        for name in channel_plugins()
        if name in taken
    ]
    return [*registry().problems, *clashes]
