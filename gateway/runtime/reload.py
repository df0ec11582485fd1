"""Applying configuration changes to the running gateway, and saying which need a restart.

``switchboard config set`` (or an editor) changes config.toml; the gateway reloads when the
file changes (its size and modification time, looked at every ``POLL_SECONDS``; ``.env``
too) and on SIGHUP (``switchboard run`` forwards it here). A reload reads the whole
configuration again, every source merged as at start; one that does not load is refused
with its error in the log, and the running configuration stays.

Of the keys that changed, those :func:`live_settings` knows are applied at once (the model's context
window and answer size, the turn's bounds, the per-person limits and the money caps of
``[limits]``, the log level). Every
other key is used by something built at start (a channel's connection, the store, the
tools) and needs a restart; the log says which, and so does ``data/reload.json``, which
``switchboard config set`` reads to tell its user what happened to the key it set.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent.agent import Agent
from gateway.config.settings import Settings, load_settings
from gateway.core.errors import ConfigError
from gateway.core.system.fileutil import write_atomic
from gateway.runtime.people.budget import UserBudget

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0
REPORT = "reload.json"  # in data_dir: the latest reload, for `switchboard config set`

Apply = Callable[[Settings], None]


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """What one reload did. ``config_sha``: the config.toml it read (``config set`` waits
    for the one it wrote)."""

    at: float
    config_sha: str
    applied: tuple[str, ...] = ()  # changed keys now in effect
    restart: tuple[str, ...] = ()  # keys that differ from the running gateway's until a restart
    error: str | None = None  # the configuration did not load; nothing was applied


def config_sha(path: Path) -> str:
    """The fingerprint of config.toml's text ("" when there is none)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def read_report(data_dir: Path) -> ReloadReport | None:
    """The gateway's latest reload, as ``config set`` reads it."""
    try:
        data = json.loads((data_dir / REPORT).read_text(encoding="utf-8"))
        return ReloadReport(
            at=float(data["at"]),
            config_sha=str(data["config_sha"]),
            applied=tuple(data.get("applied", ())),
            restart=tuple(data.get("restart", ())),
            error=data.get("error"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


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


def changed(old: Settings, new: Settings) -> set[str]:
    """The dotted keys whose values differ (a key only one side has counts as changed)."""
    before, after = dict(leaves(old)), dict(leaves(new))
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def live_settings(agents: Mapping[str, Agent], budget: UserBudget) -> dict[str, Apply]:
    """The keys a running gateway applies at once, each with how."""

    def window(settings: Settings) -> None:
        for agent in agents.values():  # every agent's model has the top-level window
            agent.model.window.configure(settings.llm.context_window)

    def max_tokens(settings: Settings) -> None:
        for agent in agents.values():
            agent.model.max_tokens = settings.llm.max_tokens

    def guards(settings: Settings) -> None:
        turn = settings.agent
        for agent in agents.values():
            agent.limits = replace(
                agent.limits,
                max_iterations=turn.max_iterations,
                max_turn_tokens=turn.max_turn_tokens,
                review_retries=turn.review_retries,
            )

    def limits(settings: Settings) -> None:
        budget.configure(settings.limits)

    def log_level(settings: Settings) -> None:
        logging.getLogger().setLevel(settings.log_level.upper())

    return {
        "llm.context_window": window,
        "llm.max_tokens": max_tokens,
        "agent.max_iterations": guards,
        "agent.max_turn_tokens": guards,
        "agent.review_retries": guards,
        "limits.user_daily_tokens": limits,
        "limits.user_turns_per_hour": limits,
        "limits.gateway_daily_usd": limits,
        "limits.gateway_monthly_usd": limits,
        "limits.person_daily_usd": limits,
        "limits.person_monthly_usd": limits,
        "limits.background_daily_usd": limits,
        "log_level": log_level,
    }


class ConfigReload:
    """Reloads the configuration when config.toml or .env changes and when asked
    (:meth:`reload`, on SIGHUP); one ``async with`` lifecycle (the watcher)."""

    def __init__(
        self,
        settings: Settings,
        *,
        apply: Mapping[str, Apply],
        load: Callable[[], Settings] | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.started = settings  # what the gateway was built with
        self.current = settings  # what it runs with now (the live keys reloaded)
        self._apply = dict(apply)
        self._load = load or (lambda: load_settings(home=settings.home))
        self._poll_seconds = poll_seconds
        self._files = (settings.config_file, settings.home / ".env")
        self._seen = self._stamp()
        self._reported_sha = config_sha(settings.config_file)
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ConfigReload:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self._seen = self._stamp()
        self._watcher = asyncio.create_task(self._watch(), name="config-reload")

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None

    async def reload(self, reason: str = "asked") -> ReloadReport:
        """Read the configuration again and apply what can be applied live."""
        async with self._lock:
            self._seen = self._stamp()
            sha = config_sha(self.started.config_file)
            try:
                new = await asyncio.to_thread(self._load)
            except ConfigError as exc:
                log.error("configuration not reloaded (%s): %s", reason, exc)  # noqa: TRY400 - the error says it all
                return self._report(ReloadReport(time.time(), sha, error=str(exc)), force=True)
            fresh = changed(self.current, new)
            applied = sorted(key for key in fresh if key in self._apply)
            for apply in {id(self._apply[key]): self._apply[key] for key in applied}.values():
                apply(new)
            restart = sorted(key for key in changed(self.started, new) if key not in self._apply)
            self.current = new
            if applied:
                log.info("configuration reloaded (%s): applied %s", reason, ", ".join(applied))
            waiting = sorted(fresh & set(restart))  # this change's own, not earlier ones again
            if waiting:
                log.warning(
                    "configuration reloaded (%s): %s changed and needs a restart to apply",
                    reason,
                    ", ".join(waiting),
                )
            report = ReloadReport(time.time(), sha, tuple(applied), tuple(restart))
            return self._report(report, force=bool(fresh))

    def _report(self, report: ReloadReport, *, force: bool) -> ReloadReport:
        """Written when something changed, or config.toml's text did (``config set`` waits
        for a report of the text it wrote, even one that changed nothing)."""
        if force or report.config_sha != self._reported_sha:
            self._reported_sha = report.config_sha
            data = json.dumps(asdict(report), indent=2).encode()
            try:
                write_atomic(self.started.data_dir / REPORT, data)
            except OSError as exc:
                log.warning("could not write %s: %s", REPORT, exc)
        return report

    def _stamp(self) -> tuple[tuple[int, int] | None, ...]:
        stamps: list[tuple[int, int] | None] = []
        for path in self._files:
            try:
                info = path.stat()
                stamps.append((info.st_mtime_ns, info.st_size))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._poll_seconds)  # polling a file, not synchronizing
            if self._stamp() != self._seen:
                try:
                    await self.reload("config.toml or .env changed")
                except Exception:  # a reload must never stop the gateway
                    log.exception("reloading the configuration failed")
