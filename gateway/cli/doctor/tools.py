"""Doctor's checks of what the tools stand on: the user the gateway runs as, the exec
sandbox, MCP servers, the browser that renders pages, how scans are read, and the
installed skills."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gateway.cli.doctor.checks import Check, Status
from gateway.config.settings import Settings
from gateway.core.errors import ConfigError


def root_checks() -> list[Check]:
    """A warning when the gateway runs as root (docs/security.md)."""
    from agent.tools.sandbox import contains_fork_bombs  # noqa: PLC0415

    if os.geteuid() != 0:
        return []
    bombs = "" if contains_fork_bombs() else " (and no writable pids cgroup caps its commands)"
    return [
        Check(
            "user",
            "warn",
            f"the gateway runs as root{bombs}: a command run without the sandbox, or a sandbox "
            "escape, owns the machine; run Switchboard as an unprivileged user",
        )
    ]


def sandbox_checks(settings: Settings) -> list[Check]:
    """Whether ``exec`` runs in the bubblewrap sandbox (docs/security.md)."""
    from agent.tools.sandbox import unavailable_reason  # noqa: PLC0415

    exec_settings = settings.tools.exec
    checks = [port_guard_check(settings)] if _networked_sandboxes(settings) else []
    if not exec_settings.enabled or settings.tools.safe_mode:
        return checks
    return [_sandbox_check(settings, unavailable_reason()), *checks]


def _networked_sandboxes(settings: Settings) -> bool:
    exec_settings = settings.tools.exec
    exec_network = exec_settings.enabled and exec_settings.network and not settings.tools.safe_mode
    mcp_network = any(s.command is not None and s.network for s in settings.mcp.enabled().values())
    return exec_network or mcp_network


def port_guard_check(settings: Settings) -> Check:
    """Which protection keeps networked sandboxes off the gateway's sockets, or that none
    can here and such sandboxes are refused (docs/security.md)."""
    from gateway.core.system.portguard import landlock_abi, unguarded_reason  # noqa: PLC0415

    reason = unguarded_reason()
    if reason is None:
        return Check(
            "network guard",
            "ok",
            f"Landlock ABI {landlock_abi()} port rule + seccomp socket filter: networked "
            "commands and MCP servers cannot reach the gateway's own sockets by any protocol",
        )
    return Check(
        "network guard",
        "fail",
        f"{reason}: commands and MCP servers with a network are refused here; turn their "
        "network off (tools.exec.network = false, mcp.servers.<name>.network = false)",
    )


def _sandbox_check(settings: Settings, problem: str | None) -> Check:
    exec_settings = settings.tools.exec
    if exec_settings.sandbox == "off":
        return Check(
            "exec sandbox", "warn", "tools.exec.sandbox is 'off': commands run on the host"
        )
    if problem is None:
        reach = "with" if exec_settings.network else "without"
        return Check("exec sandbox", "ok", f"bubblewrap: the workspace only, {reach} network")
    if exec_settings.sandbox == "bwrap":
        return Check("exec sandbox", "fail", f"{problem}: the gateway refuses to start")
    if in_container():
        return Check(
            "exec sandbox",
            "warn",
            "commands run unsandboxed in this container (they can read everything the "
            f"gateway can, /data included): {problem}. Docker: run with --security-opt "
            "seccomp=unconfined --security-opt apparmor=unconfined --security-opt "
            "systempaths=unconfined (compose.yaml does), or set tools.exec.sandbox = "
            '"off" to accept it',
        )
    return Check("exec sandbox", "warn", f"commands run unsandboxed on the host: {problem}")


async def mcp_checks(settings: Settings) -> list[Check]:
    """Every enabled MCP server: does it start, what is left out, where it runs (docs/tools.md)."""
    from agent.tools.sandbox import unavailable_reason  # noqa: PLC0415
    from gateway.cli.mcp import budget_note, probe_servers  # noqa: PLC0415

    enabled = settings.mcp.enabled()
    if not enabled:
        return []
    try:
        results = await probe_servers(settings, list(enabled))
    except ConfigError as exc:
        return [Check("mcp", "fail", str(exc))]
    checks = []
    wants_sandbox = any(s.stdio and s.sandbox for s in enabled.values())
    problem = unavailable_reason() if wants_sandbox and settings.mcp.sandbox == "auto" else None
    if problem is not None:
        checks.append(Check("mcp sandbox", "warn", f"stdio servers run on the host: {problem}"))
    host = settings.mcp.sandbox == "off" or problem is not None
    unsandboxed = {n for n, s in enabled.items() if s.stdio and (host or not s.sandbox)}
    for result in results:
        label = f"mcp {result.spec.name}"
        if not result.ok:
            checks.append(Check(label, "fail", f"cannot start or reach it: {result.error}"))
            continue
        where = " on the host" if result.spec.name in unsandboxed else ""
        checks.append(
            Check(
                label,
                "ok",
                f"{len(result.tools)} tool(s), {len(result.read_only)} read-only{where}",
            )
        )
        if result.skipped:
            left = "; ".join(f"{s.tool} ({s.reason})" for s in result.skipped[:10])
            checks.append(Check(label, "warn", f"{len(result.skipped)} tool(s) left out: {left}"))
        if "member" in result.spec.roles:
            checks.append(Check(label, "warn", "members may use its tools (roles includes member)"))
    if any(r.ok for r in results):
        checks.append(Check("mcp tools", "ok", budget_note(settings, results)))
    return checks


def in_container() -> bool:
    """Docker (/.dockerenv), Podman (/run/.containerenv) or a ``container`` variable."""
    markers = (Path("/.dockerenv"), Path("/run/.containerenv"))
    return any(m.exists() for m in markers) or bool(os.environ.get("container"))  # noqa: SIM112 - podman sets it lower-case


async def browser_check(settings: Settings) -> list[Check]:
    """Whether web_fetch can render pages with a browser: Chromium is launched once."""
    from agent.tools.web import web_browser  # noqa: PLC0415
    from agent.web.chromium import BrowserUnavailable  # noqa: PLC0415

    web = settings.tools.web
    if not web.enabled:
        return []
    if web.browser == "off":
        return [Check("browser", "ok", "tools.web.browser is 'off': pages are read as served")]
    try:
        browser = web_browser(web)
    except ConfigError as exc:
        return [Check("browser", "fail", f"{exc}: the gateway refuses to start")]
    if browser is None:  # not reached: only "off" gives none
        return []
    try:
        async with browser:
            found = await browser.probe()
    except BrowserUnavailable as exc:
        status: Status = "fail" if web.browser == "always" else "warn"
        return [Check("browser", status, f"pages are read without running their scripts: {exc}")]
    when = "every page" if web.browser == "always" else "pages that need scripts"
    return [Check("browser", "ok", f"{found} renders {when}")]


def skill_checks(settings: Settings) -> list[Check]:
    """Skills whose SKILL.md front matter cannot be read are left out of every prompt: say
    which; and those that look malicious, or declare a tool no tool has."""
    from agent.skills import SkillLibrary, suspicious  # noqa: PLC0415
    from agent.skills.review import unknown_tools  # noqa: PLC0415
    from gateway.runtime.agents.assembly import workspaces  # noqa: PLC0415

    checks, loaded = [], 0
    for workspace in dict.fromkeys(workspaces(settings).values()):
        library = SkillLibrary(workspace / "skills")
        loaded += len(library.skills())
        for skill in library.skills():
            where = skill.path.relative_to(workspace)
            checks += [
                Check("skills", "warn", f"{where} {why}")
                for _, why in unknown_tools(skill, settings.mcp.servers)
            ]
            reasons = suspicious(skill.path.read_text(encoding="utf-8", errors="replace"))
            if reasons:
                checks.append(
                    Check(
                        "skills",
                        "warn",
                        f"{where} {' and '.join(reasons)}: read it before trusting it; its "
                        "text cannot widen the tool policy, but the owner could follow it",
                    )
                )
        for problem in library.problems():
            where = problem.path.relative_to(workspace)
            checks.append(
                Check("skills", "warn", f"{where}: {problem.reason}; the skill is skipped")
            )
    if loaded or checks:
        checks.append(Check("skills", "ok", f"{loaded} skill{'' if loaded == 1 else 's'} loaded"))
    return checks


def scan_check(settings: Settings) -> Check:
    """How a scanned PDF (images of pages, no text) reaches the model: as pictures of its
    pages, or read by OCR (``tools.documents.ocr``), or not at all."""
    from agent.documents.reader import ocr_for  # noqa: PLC0415 - when doctor runs

    documents = settings.tools.documents
    ocr = ocr_for(documents, vision=settings.llm.vision)
    if ocr is not None:
        program, languages = ocr
        listed = subprocess.run(
            [program, "--list-langs"], capture_output=True, text=True, timeout=10, check=False
        )
        have = set(listed.stdout.split()[1:]) if listed.returncode == 0 else set()
        lacking = [lang for lang in languages.split("+") if lang not in have]
        if lacking:
            packages = " ".join(f"tesseract-ocr-{lang}" for lang in lacking)
            return Check("scans", "warn", f"OCR lacks {', '.join(lacking)}: apt install {packages}")
        return Check("scans", "ok", f"scanned PDFs are read by OCR (Tesseract, {languages})")
    if settings.llm.vision and documents.ocr != "always":
        return Check("scans", "ok", "scanned PDFs are shown to the model as pictures of pages")
    if documents.ocr == "off":
        return Check("scans", "ok", 'scanned PDFs are not read (tools.documents.ocr = "off")')
    return Check(
        "scans",
        "warn",
        "scanned PDFs cannot be read: the model sees no images (llm.vision) and Tesseract "
        "is not installed (apt install tesseract-ocr)",
    )
