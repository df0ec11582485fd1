"""``switchboard doctor`` and ``switchboard status``: what is wrong, and what to do about it."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Literal

from gateway.errors import AnotherInstanceRunning
from gateway.lock import ProcessLock
from gateway.settings import Settings
from gateway.store import Store

Status = Literal["ok", "warn", "fail"]
_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    message: str


def workspace_checks(settings: Settings) -> list[Check]:
    checks = []
    home, workspace = settings.home, settings.workspace_dir
    if not settings.config_file.exists():
        checks.append(
            Check(
                "config",
                "warn",
                f"{settings.config_file} does not exist; run `switchboard onboard`",
            )
        )
    else:
        checks.append(Check("config", "ok", f"{settings.config_file} is valid"))
    if not workspace.is_dir():
        checks.append(
            Check("workspace", "fail", f"{workspace} does not exist; run `switchboard onboard`")
        )
    elif not os.access(workspace, os.W_OK):
        checks.append(Check("workspace", "fail", f"{workspace} is not writable by this user"))
    else:
        present = [
            n
            for n in ("AGENTS.md", "SOUL.md", "USER.md", "IDENTITY.md", "TOOLS.md")
            if (workspace / n).exists()
        ]
        checks.append(Check("workspace", "ok", f"{workspace} ({len(present)}/5 bootstrap files)"))
    if settings.data_dir.exists() and not os.access(settings.data_dir, os.W_OK):
        checks.append(Check("data", "fail", f"{settings.data_dir} is not writable"))
    if workspace == home or settings.data_dir.is_relative_to(workspace):
        checks.append(
            Check(
                "workspace",
                "warn",
                "the workspace contains Switchboard's own data; tools are still refused access to it, but keep them apart",
            )
        )
    return checks


def llm_key_check(settings: Settings) -> Check:
    llm = settings.llm
    if llm.resolved_api_key() is None and llm.base_url is None:
        env = "ANTHROPIC_API_KEY" if llm.provider == "anthropic" else "OPENAI_API_KEY"
        return Check(
            "llm key",
            "fail",
            f"no API key: set SWITCHBOARD_LLM__API_KEY or {env}, or point SWITCHBOARD_LLM__BASE_URL at a local server",
        )
    return Check(
        "llm key",
        "ok",
        "an API key is configured" if llm.resolved_api_key() else "no key (local server)",
    )


async def llm_reachability(settings: Settings) -> Check:
    from agent.llm.errors import LLMAuthError, LLMBadRequest, LLMError, LLMUnavailable  # noqa: PLC0415
    from agent.llm.factory import create_provider  # noqa: PLC0415
    from agent.llm.types import ChatMessage, LLMRequest, SystemPrompt  # noqa: PLC0415

    llm = settings.llm
    where = llm.base_url or (
        "api.anthropic.com" if llm.provider == "anthropic" else "api.openai.com"
    )
    provider = create_provider(llm.model_copy(update={"max_retries": 0, "timeout_seconds": 20}))
    request = LLMRequest(
        SystemPrompt("Reply with the single word OK."), (ChatMessage("user", "ping"),), max_tokens=8
    )
    try:
        await asyncio.wait_for(provider.complete(request), 25)
    except LLMAuthError:
        return Check("llm", "fail", f"{where} refused the API key; check SWITCHBOARD_LLM__API_KEY")
    except LLMUnavailable as exc:
        return Check(
            "llm",
            "fail",
            f"cannot reach {where} ({exc.status_code or 'no response'}); is the server running and SWITCHBOARD_LLM__BASE_URL right?",
        )
    except LLMBadRequest as exc:
        hint = " (unknown model? check SWITCHBOARD_LLM__MODEL)" if exc.status_code == 404 else ""
        return Check("llm", "fail", f"{where} rejected a test request{hint}: {exc}")
    except (LLMError, TimeoutError) as exc:
        return Check("llm", "fail", f"{where} did not answer a test request: {exc or 'timeout'}")
    finally:
        await provider.aclose()
    return Check("llm", "ok", f"{llm.provider} model {llm.model} at {where} answered")


def channel_checks(settings: Settings) -> list[Check]:
    from channels import REGISTRY, enabled_channels  # noqa: PLC0415

    enabled = enabled_channels(settings)
    checks = [Check(f"channel {name}", "ok", "configured") for name in enabled]
    if not enabled:
        known = ", ".join(REGISTRY) or "none yet"
        checks.append(
            Check(
                "channels",
                "warn",
                f"no chat channel configured (available: {known}); `switchboard chat` still works",
            )
        )
    return checks


def security_checks(settings: Settings) -> list[Check]:
    """Risky settings, each with the threat it opens (docs/security.md)."""
    from channels import enabled_channels  # noqa: PLC0415

    checks = []
    for name in enabled_channels(settings):
        section = settings.channel_sections()[name]
        if section.dm_policy == "open":
            checks.append(
                Check(
                    f"{name} access",
                    "warn",
                    "dm_policy is 'open': anyone who finds the bot can use it (and your model budget)",
                )
            )
        if "*" in section.allow_from:
            checks.append(
                Check(f"{name} access", "warn", "allow_from contains '*': every sender is allowed")
            )
        if section.group_policy == "open":
            checks.append(
                Check(
                    f"{name} access",
                    "warn",
                    "group_policy is 'open': the bot answers in any group it is added to",
                )
            )
    policy = settings.tools.policy
    if "exec" not in policy.group_deny and settings.tools.exec.enabled:
        checks.append(
            Check(
                "tool policy",
                "warn",
                "exec is allowed in group chats: any group member can run commands on this machine",
            )
        )
    if "exec" not in policy.member_deny and settings.tools.exec.enabled:
        checks.append(
            Check(
                "tool policy",
                "warn",
                "exec is allowed for members: every paired or allowlisted user can run commands",
            )
        )
    if not policy.taint_guard:
        checks.append(
            Check(
                "tool policy",
                "warn",
                "taint_guard is off: web pages and emails can trigger side effects",
            )
        )
    if settings.web.host not in ("127.0.0.1", "localhost", "::1") and settings.web.token is None:
        checks.append(
            Check(
                "web",
                "fail",
                f"web.host is {settings.web.host} without web.token: the gateway refuses to start",
            )
        )
    if not checks:
        checks.append(Check("security", "ok", "no risky settings found"))
    return checks


async def run_doctor(settings: Settings) -> int:
    checks = [*workspace_checks(settings), *security_checks(settings), llm_key_check(settings)]
    if checks[-1].status != "fail":
        checks.append(await llm_reachability(settings))
    checks.extend(channel_checks(settings))
    width = max(len(c.name) for c in checks)
    for check in checks:
        print(f"[{_MARK[check.status]}] {check.name:<{width}}  {check.message}")
    failed = sum(c.status == "fail" for c in checks)
    print(f"\n{failed} problem(s) found." if failed else "\nAll checks passed.")
    return 1 if failed else 0


async def print_status(settings: Settings) -> int:
    lock = ProcessLock(settings.data_dir / "switchboard.lock")
    try:
        lock.acquire()
        running = "not running"
        lock.release()
    except AnotherInstanceRunning as exc:
        running = f"running ({str(exc).split(')')[0].split('(')[-1]})"
    print(f"gateway: {running}")
    if not (settings.data_dir / "switchboard.db").exists():
        print("store: empty (no messages yet)")
        return 0
    async with Store(settings.data_dir / "switchboard.db") as store:
        counts = await store.journal.counts()
        print(
            f"messages waiting: {counts.get('pending', 0)}, in a running turn: {counts.get('processing', 0)}"
        )
        print(
            f"replies unsent: {await store.outbox.pending_count()}, failed: {await store.outbox.failed_count()}"
        )
        last = await store.kv.get("last_chat")
        if last:
            print(f"owner's last DM (heartbeat home): {last}")
    return 0
