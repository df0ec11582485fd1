"""``switchboard doctor`` and ``switchboard status``: what is wrong, and what to do about it."""

from __future__ import annotations

import asyncio
import importlib
import os

from pydantic import BaseModel, SecretStr

from gateway.cli.check import Check, Status
from gateway.cli.doctor_tools import (
    browser_check,
    mcp_checks,
    root_checks,
    sandbox_checks,
    skill_checks,
)
from gateway.config.settings import Settings
from gateway.core.channel import SupportsProbe
from gateway.core.errors import (
    AnotherInstanceRunning,
    ChannelPermanentError,
    ChannelRateLimited,
    ChannelTransientError,
    ConfigError,
)
from gateway.core.lock import ProcessLock
from gateway.store import Store

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


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


PROBE_TIMEOUT = 15.0  # seconds for one channel's login check


async def channel_checks(settings: Settings, *, seconds: float = PROBE_TIMEOUT) -> list[Check]:
    """Log in to every enabled channel's platform at once (see :func:`probe_channel`)."""
    from channels import REGISTRY, enabled_channels  # noqa: PLC0415

    enabled = enabled_channels(settings)
    if not enabled:
        known = ", ".join(REGISTRY) or "none yet"
        return [
            Check(
                "channels",
                "warn",
                f"no chat channel configured (available: {known}); `switchboard chat` still works",
            )
        ]
    return list(await asyncio.gather(*(probe_channel(settings, n, seconds) for n in enabled)))


async def probe_channel(settings: Settings, name: str, seconds: float) -> Check:
    """Build the channel (not started) and let it log in: who are we there, or what to fix.

    A channel without :class:`SupportsProbe` is only reported as configured. Messages are
    scrubbed of the section's secrets, whatever a library put into an error.
    """
    from channels import REGISTRY  # noqa: PLC0415

    label = f"channel {name}"
    secrets = _secrets(settings.channel_sections()[name])

    def check(status: Status, message: str) -> Check:
        for secret in secrets:
            message = message.replace(secret, "***")
        return Check(label, status, message)

    module_name, _, attr = REGISTRY[name].partition(":")
    try:
        channel = getattr(importlib.import_module(module_name), attr)(settings)
    except ConfigError as exc:
        return check("fail", str(exc))
    except ImportError as exc:
        return check("fail", f"cannot load the {name} channel ({exc}); reinstall Switchboard")
    except Exception as exc:  # the gateway would not start it either; say why, check the rest
        return check("fail", f"cannot set up the {name} channel: {type(exc).__name__}: {exc}")
    if not isinstance(channel, SupportsProbe):
        return check("ok", "configured")
    try:
        async with asyncio.timeout(seconds):
            return check("ok", await channel.probe())
    except TimeoutError:
        return check("fail", f"cannot reach {name}: no answer within {seconds:g} s")
    except ChannelPermanentError as exc:
        hint = "" if "SWITCHBOARD_" in str(exc) else f"; check the [{name}] settings"
        return check("fail", f"{exc}{hint}")
    except ChannelTransientError as exc:
        text = str(exc)
        return check("fail", text if "cannot reach" in text else f"cannot reach {name}: {text}")
    except ChannelRateLimited as exc:
        return check("warn", f"{exc}; the credentials were not checked, try again later")
    except Exception as exc:  # a probe bug must not hide the other checks
        return check("fail", f"the {name} check failed unexpectedly: {type(exc).__name__}: {exc}")


def _secrets(section: BaseModel) -> list[str]:
    """Every secret of the section, as written and stripped (the adapters strip tokens)."""
    values = (getattr(section, field) for field in type(section).model_fields)
    raw = [v.get_secret_value() for v in values if isinstance(v, SecretStr)]
    found = {text for value in raw for text in (value, value.strip()) if len(text) >= 4}
    return sorted(found, key=len, reverse=True)  # a longer one may contain a shorter one


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
    checks = [
        *workspace_checks(settings),
        *skill_checks(settings),
        *security_checks(settings),
        *sandbox_checks(settings),
        *root_checks(),
        llm_key_check(settings),
    ]
    # The model, every channel and the browser are asked at once: a slow one costs its
    # own timeout only.
    if checks[-1].status != "fail":
        llm, channels, mcp, browser = await asyncio.gather(
            llm_reachability(settings),
            channel_checks(settings),
            mcp_checks(settings),
            browser_check(settings),
        )
        checks += [llm, *channels, *mcp, *browser]
    else:
        channels, mcp, browser = await asyncio.gather(
            channel_checks(settings), mcp_checks(settings), browser_check(settings)
        )
        checks += [*channels, *mcp, *browser]
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
