"""The built-in tools, configured from settings."""

from __future__ import annotations

from agent.documents.reader import DocumentReader
from agent.llm.metered import MeteredModel
from agent.skills.library import SkillLibrary
from agent.skills.tools import RunSkillScript
from agent.tools.base import Tool
from agent.tools.browser import BrowserTool
from agent.tools.files import EditFile, ListDir, ReadFile, WriteFile
from agent.tools.message import Message
from agent.tools.sandbox import ExecLimits, SandboxUnavailable, find_bwrap
from agent.tools.shell import Exec
from agent.tools.web import web_guard, web_tools
from agent.web.browser import Browser
from agent.web.sessions import BrowserSessions
from gateway.config.ports import gateway_ports
from gateway.config.settings import Settings
from gateway.core.errors import ConfigError
from gateway.core.system.portguard import PortGuard
from gateway.store import AuditLog


def default_tools(
    settings: Settings,
    *,
    llm: MeteredModel | None = None,
    audit_log: AuditLog | None = None,
    browser: Browser | None = None,
    skills: SkillLibrary | None = None,
    browser_sessions: BrowserSessions | None = None,
) -> list[Tool]:
    """The built-in tools; ``llm`` (when given) condenses long pages for web_fetch, and
    ``browser`` (the gateway's, see :func:`agent.tools.web.web_browser`) renders them;
    ``browser_sessions`` (the gateway's, see :func:`agent.tools.browser.browser_sessions`)
    are where the ``browser`` tool acts; ``audit_log`` (when given) counts each person's
    emails for ``email.max_sends_per_day``; with ``skills``, their scripts run in the same
    sandbox as exec."""
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
                "SWITCHBOARD_TOOLS__EXEC__SANDBOX=auto to run commands without it",
                field="tools.exec.sandbox",
            ) from None
    tools: list[Tool] = [
        ReadFile(DocumentReader(settings.tools.documents, sees_images=lambda: settings.llm.vision)),
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
    if skills is not None:
        tools.append(
            RunSkillScript(
                skills,
                sandbox=sandbox,
                secrets=settings.skills.secrets,
                timeout=exec_settings.timeout_seconds,
                max_output_chars=exec_settings.max_output_chars,
                protected_paths=(settings.data_dir, settings.config_file),
                guard=web_guard(settings.tools.web) if settings.tools.web.enabled else None,
            )
        )
    if settings.tools.web.enabled:
        tools.extend(web_tools(settings.tools.web, llm=llm, browser=browser))
    if browser_sessions is not None:
        tools.append(
            BrowserTool(browser_sessions, allowed_sites=settings.tools.browser.allowed_sites)
        )
    mail = settings.outgoing_mail()
    if mail is not None:  # SMTP and mail formatting load only when configured
        from agent.tools.email import SendEmail  # noqa: PLC0415

        tools.append(SendEmail(mail, sender_name=settings.agent.name, audit_log=audit_log))
    if settings.calendar.enabled:  # iCalendar and the CalDAV client load only when configured
        from agent.calendar.caldav import CalDav  # noqa: PLC0415
        from agent.tools.calendar import CalendarTool  # noqa: PLC0415

        tools.append(CalendarTool(CalDav(settings.calendar), default_zone=settings.timezone))
    if settings.images.enabled:
        from agent.tools.images import GenerateImage, ImagesEndpoint  # noqa: PLC0415

        tools.append(GenerateImage(ImagesEndpoint(settings.images)))
    return tools
