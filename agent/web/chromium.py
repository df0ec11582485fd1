"""Finding a Chromium to render pages with, and the flags that keep it on the proxy's leash.

The system Chromium (Debian's ``chromium``, what the Docker image and CI install) comes
first, then a browser Playwright installed earlier (``playwright install chromium``).
Nothing is ever downloaded at run time: without a browser, ``web_fetch`` reads pages as
served, and says so.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from gateway.core.system.install import install_command

SYSTEM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Where `playwright install chromium` puts its browsers (PLAYWRIGHT_BROWSERS_PATH overrides).
PLAYWRIGHT_CACHE = "~/.cache/ms-playwright"
PLAYWRIGHT_BUILDS = (
    "chromium-*/chrome-linux*/chrome",
    "chromium_headless_shell-*/chrome-*/chrome-headless-shell",
)


class BrowserUnavailable(Exception):
    """No browser can render pages here; the message says why and what to install."""


def find_chromium(configured: str | None = None) -> Path:
    """The browser executable: ``configured`` (``tools.web.browser_path``) or one found here."""
    if importlib.util.find_spec("playwright") is None:
        raise BrowserUnavailable(
            f"the Playwright package is not installed ({install_command('browser')})"
        )
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BrowserUnavailable(
                f"no browser executable at {path} (tools.web.browser_path); {install_hint()}"
            )
        return path
    for name in SYSTEM_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    cache = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or PLAYWRIGHT_CACHE
    for pattern in PLAYWRIGHT_BUILDS:
        builds = sorted(Path(cache).expanduser().glob(pattern))
        if builds:
            return builds[-1]
    raise BrowserUnavailable(f"Chromium was not found; {install_hint()}")


def install_hint() -> str:
    """What to install for rendering, with the command that fits this installation."""
    return (
        f"install Chromium (apt-get install chromium) and Playwright ({install_command('browser')})"
    )


def launch_args(*, js_heap_mb: int, marker: str) -> list[str]:
    """Chromium's flags: headless, quiet, and no way out but the proxy.

    The proxy itself is given per context (with ``<-loopback>``, which Playwright adds, so
    even 127.0.0.1 and localhost go through it). Around it: no QUIC (UDP would skip an
    HTTP proxy), WebRTC only through the proxy, every host name the browser would resolve
    itself maps to nothing (only the proxy resolves), no DNS prefetching, no popups, no
    permission prompts, no background services phoning home. ``marker`` names the process
    tree so its memory can be measured.
    """
    return [
        "--headless",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-dev-shm-usage",  # Docker's /dev/shm is 64 MB
        "--dns-prefetch-disable",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--block-new-web-contents",
        "--deny-permission-prompts",
        "--mute-audio",
        f"--js-flags=--max-old-space-size={js_heap_mb}",
        f"--switchboard-browser={marker}",
    ]


def sandbox_possible() -> bool:
    """Chromium's own sandbox refuses to run as root; everywhere else it is used."""
    return os.geteuid() != 0 if hasattr(os, "geteuid") else True


def tree_memory_mb(marker: str) -> float | None:
    """Memory of the browser's process tree (found by its ``marker`` flag), in MiB.

    The proportional set size (shared pages split between the processes that share them,
    so Chromium's many processes are not counted many times over), or the resident size
    where the kernel has no ``smaps_rollup``. Read from /proc (Linux); None elsewhere or
    when there is no such process.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    needle = f"--switchboard-browser={marker}".encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            if needle in (entry / "cmdline").read_bytes():
                roots.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        children.setdefault(parent, []).append(int(entry.name))
    if not roots:
        return None
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, ()))
    return sum(_process_kib(proc / str(pid)) for pid in seen) / 1024


def _process_kib(directory: Path) -> int:
    """One process's proportional (else resident) memory in KiB; 0 once it is gone."""
    for name, key in (("smaps_rollup", b"Pss:"), ("status", b"VmRSS:")):
        try:
            for line in (directory / name).read_bytes().splitlines():
                if line.startswith(key):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return 0
