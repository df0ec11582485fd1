"""Reloading the configuration while the gateway runs, and saying which keys need a restart.

``switchboard config set`` (or an editor) changes config.toml; the gateway reloads when the
file changes (its size and modification time, looked at every ``POLL_SECONDS``; ``.env``
too) and on SIGHUP (``switchboard run`` forwards it here); the settings page changes keys
through :meth:`ConfigReload.change`. Each reads the whole configuration again, every source
merged as at start, and hands it to :class:`gateway.runtime.live.apply.LiveApply`: one that
does not load, or that the gateway could not start with, is refused with its error, and the
running configuration stays (a page's change is taken out of the file again).

Of the keys that changed, those a part of the running gateway applies
(:mod:`gateway.config.live`) are applied at once; every other key is used by something
built at start (the store, the web server, ...) and needs a restart. The log says which,
and so does ``data/reload.json``, which ``switchboard config set`` reads to tell its user
what happened to the key it set.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gateway.config.live import changed
from gateway.config.settings import Settings, load_settings
from gateway.config.toml.config_file import change_config, refused
from gateway.core.errors import ConfigError
from gateway.core.system.fileutil import write_atomic
from gateway.runtime.live.apply import LiveApply, Plan

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0
REPORT = "reload.json"  # in data_dir: the latest reload, for `switchboard config set`


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """What one reload did. ``config_sha``: the config.toml and .env it read (``config set``
    waits for the ones it wrote)."""

    at: float
    config_sha: str
    applied: tuple[str, ...] = ()  # changed keys now in effect
    restart: tuple[str, ...] = ()  # keys that differ from the running gateway's until a restart
    error: str | None = None  # the configuration did not load; nothing was applied
    problems: tuple[str, ...] = ()  # applied, but something did not work (a channel's start)


def config_sha(home: Path) -> str:
    """The fingerprint of the home's config.toml and .env, the files a change writes (a
    secret goes to .env)."""
    digest = hashlib.sha256()
    for name in ("config.toml", ".env"):
        try:
            digest.update(hashlib.sha256((home / name).read_bytes()).digest())
        except OSError:
            digest.update(b"-")  # no file
    return digest.hexdigest()


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
            problems=tuple(data.get("problems", ())),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ConfigReload:
    """Reloads the configuration when config.toml or .env changes and when asked
    (:meth:`reload`, on SIGHUP), and changes it for the settings page (:meth:`change`); one
    ``async with`` lifecycle (the watcher). One change at a time."""

    def __init__(
        self,
        settings: Settings,
        *,
        live: LiveApply,
        load: Callable[[], Settings] | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.started = settings  # what the gateway was built with
        self.current = settings  # what it runs with now (the live keys reloaded)
        self._live = live
        self._load = load or (lambda: load_settings(home=settings.home))
        self._poll_seconds = poll_seconds
        self._files = (settings.config_file, settings.home / ".env")
        self._seen = self._stamp()
        self._reported_sha = config_sha(settings.home)
        self._waiting: set[str] = set()  # keys that needed a restart when they changed
        self._invalid = False  # the last reload refused the files: the log's last word
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
            sha = config_sha(self.started.home)
            try:
                new = await asyncio.to_thread(self._load)
                plan = self._live.prepare(self.current, new)
            except ConfigError as exc:
                log.error("configuration not reloaded (%s): %s", reason, exc)  # noqa: TRY400 - the error says it all
                self._invalid = True
                return self._report(ReloadReport(time.time(), sha, error=str(exc)), force=True)
            return await self._commit(plan, reason, sha)

    async def change(
        self, edits: Mapping[str, Any], *, by: str, check: bool = False
    ) -> ReloadReport:
        """Write ``edits`` (dotted key: value, or ``UNSET``) into config.toml, comments kept
        (secrets into .env: :func:`~gateway.config.toml.config_file.change_config`), and
        apply the configuration as :meth:`reload` does. A change the configuration would
        not load with, or the gateway could not start with, raises
        :class:`~gateway.config.toml.config_file.ConfigRefused` and leaves the files and the
        gateway as they were. ``check``: only say what it would do (``applied``: the keys
        that would apply at once, ``restart``: those that would need a restart); the files
        are left as they were."""
        async with self._lock:
            home = self.started.home
            before, new = await asyncio.to_thread(change_config, home, edits, by=by)
            try:
                plan = self._live.prepare(self.current, new, build=not check)
            except ConfigError as exc:
                before.put_back()
                raise refused(exc, home, tuple(edits), by=by) from exc
            finally:
                if check:
                    before.put_back()
                self._seen = self._stamp()  # this change is not the watcher's to reload
            if check:
                return ReloadReport(
                    time.time(), "", tuple(sorted(plan.applied)), tuple(sorted(plan.restart))
                )
            return await self._commit(plan, f"changed by {by}", config_sha(home))

    async def _commit(self, plan: Plan, reason: str, sha: str) -> ReloadReport:
        fresh = plan.applied | plan.restart
        problems = await self._live.commit(plan)
        self.current = plan.settings
        self._waiting |= plan.restart
        restart = sorted(k for k in changed(self.started, plan.settings) if k in self._waiting)
        applied = sorted(plan.applied)
        if applied:
            log.info("configuration reloaded (%s): applied %s", reason, ", ".join(applied))
        elif self._invalid and not plan.restart:  # else "not reloaded" stays the last word
            log.info("configuration valid again (%s): nothing to change", reason)
        self._invalid = False
        for problem in problems:
            log.warning("configuration reloaded (%s), but %s", reason, problem)
        waiting = sorted(plan.restart)  # this change's own, not earlier ones again
        if waiting:
            log.warning(
                "configuration reloaded (%s): %s changed and needs a restart to apply",
                reason,
                ", ".join(waiting),
            )
        report = ReloadReport(
            time.time(), sha, tuple(applied), tuple(restart), problems=tuple(problems)
        )
        return self._report(report, force=bool(fresh))

    def _report(self, report: ReloadReport, *, force: bool) -> ReloadReport:
        """Written when something changed, or the files' text did (``config set`` waits
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
