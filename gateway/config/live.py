"""Which settings a running gateway applies at once, and which part of it applies each.

One table for everything that tells it: the running gateway's reload
(:mod:`gateway.runtime.turns.live`), the settings page (before saving, it says which keys need
a restart), ``switchboard config set`` and the reference, docs/configuration.md. A key no
rule names needs a new process: it is used by something built once at start (the store,
the web server, the voice server, the routes between agents, ...).

What a running gateway does with each part:

* ``agents``: every agent is built again from the new settings (its model and fallbacks,
  tools and policy, turn limits, persona); the next turn uses them, a running turn ends on
  what it started with.
* ``channel``: that channel alone is stopped and started again with its new section, with
  its outbox worker (a channel turned on is started, one turned off is stopped); its access
  rules apply to the next message.
* ``mcp``: the MCP servers whose settings changed are restarted (all of them when the
  sandbox or the limits changed); the others keep their connections.
* ``schedule``: the heartbeat (on or off, interval, quiet hours, target, budget) and the
  limits on jobs.
* ``allowance``: the per-person limits and the money caps. ``logging``: the log level.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel

from gateway.config.plugins import channel_plugins


class LivePart(StrEnum):
    """The part of a running gateway that applies a key (see the module docstring)."""

    AGENTS = "agents"
    CHANNEL = "channel"
    MCP = "mcp"
    SCHEDULE = "schedule"
    ALLOWANCE = "allowance"
    LOGGING = "logging"


# First match wins; None: needs a restart though a broader rule below would apply it.
RULES: tuple[tuple[str, LivePart | None], ...] = (
    ("log_level", LivePart.LOGGING),
    ("limits.user_daily_tokens", LivePart.ALLOWANCE),
    ("limits.user_turns_per_hour", LivePart.ALLOWANCE),
    ("limits.*_usd", LivePart.ALLOWANCE),  # the money caps
    ("limits.max_concurrent_tools", LivePart.AGENTS),
    # the agent's name is also the terminal's, the web chat's and the commands'; the turn
    # timeout also the dispatcher's watchdog; resumes and stop phrases are the dispatcher's
    ("agent.name", None),
    ("agent.turn_timeout_seconds", None),
    ("agent.max_resume_attempts", None),
    ("agent.stop_phrases", None),
    ("agent.*", LivePart.AGENTS),
    ("llm.*", LivePart.AGENTS),
    # approvals' expiry is the approval desk's; documents are read before the journal, for
    # every channel; one browser serves every agent
    ("tools.approval_timeout_seconds", None),
    ("tools.documents.*", None),
    ("tools.web.browser*", None),
    ("tools.*", LivePart.AGENTS),
    ("memory.quote_share", LivePart.AGENTS),
    ("mcp.max_offered_*", LivePart.AGENTS),
    ("mcp.*", LivePart.MCP),
    # an agent's workspace is prepared at start; who may message whom is the directory's
    ("agents.*.workspace", None),
    ("agents.*.may_message", None),
    ("agents.*.*", LivePart.AGENTS),  # an agent added or removed needs a restart
    ("agent_messages.main_description", LivePart.AGENTS),
    ("heartbeat.timezone", None),  # the old name of user.timezone
    ("heartbeat.*", LivePart.SCHEDULE),
    ("scheduler.max_subagents", None),
    ("scheduler.subagent_timeout_seconds", None),
    ("scheduler.*", LivePart.SCHEDULE),
)


def live_part(key: str) -> LivePart | None:
    """The part that applies the dotted ``key`` live, or None when it needs a restart."""
    for pattern, part in RULES:
        if fnmatchcase(key, pattern):
            return part
    section = key.split(".", 1)[0]
    if "." in key and section in channel_plugins():
        return LivePart.CHANNEL  # a chat channel's section ([telegram], [email], ...)
    return None


def applies_live(key: str) -> bool:
    return live_part(key) is not None


def leaves(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every setting as (dotted key, value): sections and named tables (``agents.work``)
    are opened, lists are one value."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        key = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            yield from leaves(value, f"{key}.")
        elif isinstance(value, Mapping) and all(isinstance(v, BaseModel) for v in value.values()):
            for child, section in value.items():
                yield from leaves(section, f"{key}.{child}.")
            if not value:
                yield key, {}
        else:
            yield key, value


def changed(old: BaseModel, new: BaseModel) -> set[str]:
    """The dotted keys whose values differ (a key only one side has counts as changed)."""
    before, after = dict(leaves(old)), dict(leaves(new))
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
