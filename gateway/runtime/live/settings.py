"""The settings page's change: the values a form posts become edits of config.toml
(:mod:`gateway.config.reference.form`; a secret's go to the home's .env instead), written
and applied through the gateway's one path for configuration changes
(:meth:`gateway.runtime.reload.ConfigReload.change`), and recorded in the audit log: who
changed which keys (never their values, which may be secrets).

A change with a field it refuses writes nothing; a change the whole configuration refuses
(a value out of range, a check across sections) names the field and why, and the file is
as it was.

A revocation of someone's access (:mod:`gateway.runtime.intake.revoke`) takes them out of
config.toml's lists the same way (:func:`change_keys`, through :class:`LiveAccess`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gateway.config.reference.form import form_edits
from gateway.config.settings import Settings
from gateway.config.sources import describe
from gateway.config.toml.config_file import ConfigRefused
from gateway.core.errors import ConfigFileUnreadable
from gateway.runtime.intake.revoke import Written
from gateway.runtime.reload import ConfigReload
from gateway.store import AuditLog
from gateway.web.view import SettingsChange

log = logging.getLogger(__name__)

AUDIT_KIND = "settings_changed"


async def change_settings(
    reload: ConfigReload,
    audit: AuditLog,
    values: Mapping[str, str],
    *,
    by: str,
    check: bool = False,
    clear: Sequence[str] = (),
) -> SettingsChange:
    """See :meth:`gateway.web.view.GatewayView.change_settings`."""
    settings: Settings = reload.current
    edits, errors = form_edits(settings, describe(settings.home), values, clear)
    if errors:
        return SettingsChange(errors=errors)
    if not edits:
        return SettingsChange()
    return await change_keys(
        reload, audit, edits, by=by, named=f"the settings page ({by})", check=check
    )


async def change_keys(
    reload: ConfigReload,
    audit: AuditLog,
    edits: Mapping[str, Any],
    *,
    by: str,
    named: str,
    check: bool = False,
) -> SettingsChange:
    """Write ``edits`` (dotted key: value, or ``UNSET``) and apply them as the settings page
    does, audited as a change of settings by ``by``; ``named``: the change as a refusal
    names it ("the settings page (web:owner)"). Also what a revocation writes
    (:mod:`gateway.runtime.intake.revoke`)."""
    keys = tuple(sorted(edits))
    try:
        report = await reload.change(edits, by=named, check=check)
    except ConfigRefused as exc:
        return SettingsChange(errors=_by_key(exc, keys, named), changed=keys)
    except ValueError as exc:  # a value TOML cannot hold where the key goes
        return SettingsChange(errors={"": str(exc)}, changed=keys)
    except ConfigFileUnreadable as exc:  # fixed in an editor; nothing was written
        return SettingsChange(errors={"": f"{exc}; fix it in an editor first"}, changed=keys)
    mine = set(keys)
    applied = tuple(k for k in report.applied if _within(k, mine))
    restart = tuple(k for k in report.restart if _within(k, mine))
    if not check:
        await audit.record(
            AUDIT_KIND,
            detail={
                "by": by,
                "keys": list(keys),
                "applied": list(applied),
                "restart": list(restart),
            },
        )
    return SettingsChange(
        saved=not check,
        changed=keys,
        applied=applied,
        restart=restart,
        problems=report.problems,
    )


def _within(key: str, edited: set[str]) -> bool:
    """Whether ``key`` (``mcp.servers.fs.command``) is one of the edited keys or under one
    (``mcp.servers``)."""
    return any(key == e or key.startswith(f"{e}.") for e in edited)


def _by_key(exc: ConfigRefused, keys: tuple[str, ...], page: str) -> dict[str, str]:
    """Each problem under the edited key it is about ("" for the rest), told as the page
    shows it beside that key: not naming the key again, nor the page as who set it (the
    command line's message does both)."""
    errors: dict[str, str] = {}
    for where, why in exc.problems:
        key = next((k for k in keys if where == k or where.startswith(f"{k}.")), "")
        what = why.removeprefix(f"{where}: ").removesuffix(f" (set by {page})")
        told = what if key == where or not where else f"{where}: {what}"
        errors[key] = f"{errors[key]}; {told}" if key in errors else told
    return errors


class LiveAccess:
    """The running gateway's configuration as a revocation reads and changes it
    (:class:`gateway.runtime.intake.revoke.AccessConfig`): written and applied at once, as
    the settings page's changes are. ``reload``: the gateway's, asked for when a revocation
    runs (it is built after the commands that revoke: it re-configures the scheduler, whose
    jobs reach them)."""

    def __init__(self, reload: Callable[[], ConfigReload], audit: AuditLog) -> None:
        self._reload = reload
        self._audit = audit

    def current(self) -> Settings:
        return self._reload().current

    async def write(self, edits: Mapping[str, list[str]], *, by: str) -> Written:
        change = await change_keys(
            self._reload(), self._audit, edits, by=by, named=f"a revocation ({by})"
        )
        if change.errors:
            return Written(
                refused="; ".join(f"{k}: {v}" if k else v for k, v in change.errors.items())
            )
        notes = list(change.problems)
        if change.restart:
            notes.append(
                f"the running gateway applies {', '.join(change.restart)} only after a "
                "restart: until then it lets them in as before"
            )
        return Written(notes=tuple(notes))
