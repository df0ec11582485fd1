"""The built-in tools, configured from settings."""

from __future__ import annotations

from agent.documents.reader import DocumentReader
from agent.llm.metered import MeteredModel
from agent.tools.base import Tool
from agent.tools.browser import BrowserTool
from agent.tools.files import EditFile, ListDir, ReadFile, WriteFile
from agent.tools.message import Message
from agent.tools.sandbox import ExecLimits, SandboxUnavailable, find_bwrap
from agent.tools.shell import Exec
from agent.tools.web import web_tools
from agent.web.browser import Browser
from agent.web.sessions import BrowserSessions
from gateway.config.ports import gateway_ports
from gateway.config.settings import Settings
from gateway.core.errors import ConfigError
from gateway.core.portguard import PortGuard
from gateway.store import AuditLog


def default_tools(
    settings: Settings,
    *,
    llm: MeteredModel | None = None,
    audit_log: AuditLog | None = None,
    browser: Browser | None = None,
    browser_sessions: BrowserSessions | None = None,
) -> list[Tool]:
    """The built-in tools; ``llm`` (when given) condenses long pages for web_fetch, and
    ``browser`` (the gateway's, see :func:`agent.tools.web.web_browser`) renders them;
    ``browser_sessions`` (the gateway's, see :func:`agent.tools.browser.browser_sessions`)
    are where the ``browser`` tool acts; ``audit_log`` (when given) counts each person's
    emails for ``email.max_sends_per_day``."""
    exec_settings = settings.tools.exec
    sandbox = None
    if exec_settings.enabled and not settings.tools.safe_mode:
        try:
            limits = ExecLimits(
                max_processes=exec_settings.max_processes,
                max_memory_mb=exec_settings.max_memory_mb,
                max_file_mb=exec_settings.max_file_mb,
                tmp_mb=exec_settings.tmp_mb,
            )
            sandbox = find_bwrap(
                exec_settings.sandbox,
                network=exec_settings.network,
                limits=limits,
                guard=PortGuard(lambda: gateway_ports(settings)),
            )
        except SandboxUnavailable as exc:
            raise ConfigError(
                f"tools.exec.sandbox is 'bwrap' but {exc}; install it, or set "
                "SWITCHBOARD_TOOLS__EXEC__SANDBOX=auto to run commands without it"
            ) from None
    tools: list[Tool] = [
        ReadFile(DocumentReader(settings.tools.documents)),
        WriteFile(),
        EditFile(),
        ListDir(),
        Exec(
            timeout=exec_settings.timeout_seconds,
            max_output_chars=exec_settings.max_output_chars,
            extra_deny_patterns=exec_settings.extra_deny_patterns,
            protected_paths=(settings.data_dir, settings.config_file),
            sandbox=sandbox,
        ),
        Message(),
    ]
    if settings.tools.web.enabled:
        tools.extend(web_tools(settings.tools.web, llm=llm, browser=browser))
    if browser_sessions is not None:
        tools.append(
            BrowserTool(browser_sessions, allowed_sites=settings.tools.browser.allowed_sites)
        )
    if settings.email.can_send:  # SMTP and mail formatting load only when configured
        from agent.tools.email import SendEmail  # noqa: PLC0415

        tools.append(
            SendEmail(settings.email, sender_name=settings.agent.name, audit_log=audit_log)
        )
    return tools
