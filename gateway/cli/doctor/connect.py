"""Doctor's checks of what other programs reach: webhooks and the API (docs/connect.md).

A hook without a secret and an API without a token are configuration errors (the gateway
refuses to start; doctor's config check names the key). Here: whether they are served at
all, where a hook's answers go, roles above member, and a bind other machines can reach.
"""

from __future__ import annotations

import asyncio

from gateway.cli.doctor.checks import Check
from gateway.config.connect import HookSettings
from gateway.config.settings import Settings
from gateway.core.principal import Role


async def connect_checks(settings: Settings) -> list[Check]:
    if not settings.hooks and not settings.api.enabled:
        return []
    checks = _serving(settings)
    home = None
    if any(h.deliver_to is None for h in settings.hooks.values()):
        home = await _heartbeat_chat(settings)
    served = _chat_channels(settings)
    for name, hook in settings.hooks.items():
        target = hook.deliver_to or home
        check = _hook_check(name, hook, target)
        channel = (target or "").split(":", 1)[0]
        if target and channel not in served:
            check = Check(
                check.name,
                "fail",
                f"{check.message}; but {channel} is not configured here: its answers would "
                "wait in the outbox",
            )
        checks.append(check)
    if settings.api.enabled:
        roles = ", ".join(f"{t.name} ({t.role})" for t in settings.api.tokens)
        count = len(settings.api.tokens)
        checks.append(Check("api", "ok", f"/v1 answers {count} token(s): {roles}"))
    return checks


def _hook_check(name: str, hook: HookSettings, target: str | None) -> Check:
    """Where a hook answers (``target``: its deliver_to, else the owner's chat) and as whom."""
    where = f"answers in {target}" if target else "has no chat to answer in yet"
    notes = []
    if target is None:
        notes.append(
            f"set hooks.{name}.deliver_to (<channel>:<chat id>), or talk to the bot once as "
            "its owner"
        )
    if hook.role is not Role.MEMBER:
        notes.append(
            f"role {hook.role}: its payload is outside content, yet the turn gets more rights "
            "than a member's (side effects still need your prompt's words)"
        )
    message = "; ".join([f"POST /hooks/{name} acts as {hook.role} and {where}", *notes])
    return Check(f"hook {name}", "warn" if notes else "ok", message)


def _chat_channels(settings: Settings) -> set[str]:
    """The chats answers can reach: configured platforms, the web chat, the terminal."""
    from channels import enabled_channels  # noqa: PLC0415

    local = {"terminal", *({"webchat"} if settings.web.enabled else set())}
    return {*enabled_channels(settings), *local}


async def _heartbeat_chat(settings: Settings) -> str | None:
    """Where a hook without ``deliver_to`` answers: the heartbeat's chat (``heartbeat.target``,
    else the owner's home chat as the store remembers it), or None."""
    from gateway.runtime.schedule.heartbeat import OwnersChat  # noqa: PLC0415
    from gateway.runtime.storage import store_for  # noqa: PLC0415

    if settings.heartbeat.target:
        return settings.heartbeat.target
    if settings.storage.url is None and not (settings.data_dir / "switchboard.db").exists():
        return None
    try:
        async with asyncio.timeout(10), store_for(settings, migrates=False) as store:
            home = await OwnersChat.stored(settings, store).get()
    except Exception:  # the store's own check says what is wrong with it
        return None
    return None if home is None else home.label


def _serving(settings: Settings) -> list[Check]:
    web = settings.web
    what = " and ".join(
        part
        for part, on in (("webhooks", bool(settings.hooks)), ("the API", settings.api.enabled))
        if on
    )
    if not web.enabled:
        return [
            Check(
                "connect",
                "fail",
                f"{what} are configured but web.enabled is false: nothing serves them",
            )
        ]
    if not web.loopback:
        return [
            Check(
                "connect",
                "warn",
                f"{what} are served on {web.host}:{web.port}, reachable from other machines; "
                "signatures and tokens travel in every request: put a TLS reverse proxy in "
                "front, or bind web.host to 127.0.0.1 and forward to it",
            )
        ]
    return [
        Check(
            "connect",
            "ok",
            f"{what} on http://127.0.0.1:{web.port} (this machine only; senders elsewhere "
            "need a reverse proxy or tunnel to it)",
        )
    ]
