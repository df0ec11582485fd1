"""The pages of the web server: the chat, the control center's sections, a turn's trace.

Each page is a static shell rendered here with the navigation every page shares (the chat
is one click from every section, and every section one click from the chat); the data comes
from JSON endpoints and is drawn by the section's script with ``textContent`` only. No build
step: the scripts and the stylesheet are plain files in ``gateway/web/static``.

A shell holds nothing of the owner's: a navigation carries only the session cookie, which
every port of the host gets too, not the page key (gateway/web/access/security.py). Every
page loads ``static/session.js`` first, which sends the key with each request the page's
scripts make, signs out with it, and sends a browser without it to sign in again.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

from aiohttp import web

STATIC_DIR = Path(__file__).parent / "static"
NAV_MARK = "<!--nav-->"
SIGN_OUT_MARK = "<!--sign-out-->"
# In every page's header: the browser's session ends (and with it what its pages keep open);
# static/session.js posts it with the page key (the cookie alone ends no session).
SIGN_OUT = (
    '<form method="post" action="/logout" class="signout">'
    '<button type="submit" class="link">Sign out</button></form>'
)


@dataclass(frozen=True, slots=True)
class Section:
    name: str  # its path and script: /people, static/control/people.js
    label: str  # in the navigation
    title: str  # the page's heading
    badge: str = ""  # the live count shown beside its label (common.js: pulse)


SECTIONS = (
    Section("conversations", "Conversations", "Conversations"),
    Section("people", "People", "People and access", badge="pairing"),
    Section("approvals", "Approvals", "Approvals", badge="approvals"),
    Section("memory", "Memory", "Memory and workspace"),
    Section("jobs", "Jobs", "Heartbeat and scheduled jobs"),
    Section("usage", "Usage", "Usage and cost"),
    Section("settings", "Settings", "Settings"),
    Section("health", "Health", "Health", badge="problems"),
)


def nav(current: str) -> str:
    """The navigation: Chat, then every section (``current`` marked for screen readers),
    with its script (static/nav.js: on a narrow screen the row scrolls, and the script
    keeps the current item and the counts in sight)."""
    links = [("", "Chat", "")] + [(s.name, s.label, s.badge) for s in SECTIONS]
    items = []
    for name, label, badge in links:
        here = ' aria-current="page"' if name == current else ""
        count = f' <span class="badge" data-badge="{badge}" hidden></span>' if badge else ""
        items.append(f'<a href="/{name}"{here}>{escape(label)}{count}</a>')
    return (
        f'<nav class="sections" aria-label="Switchboard"><div class="strip">{"".join(items)}'
        '</div></nav><script src="/static/nav.js" defer></script>'
    )


_SHELL = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover">
<meta name="color-scheme" content="light dark">
<title>{title} · Switchboard</title>
<link rel="stylesheet" href="/static/app.css">
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
<script src="/static/session.js" defer></script>
<script src="/static/control/common.js" defer></script>
{scripts}
</head>
<body class="control-page" data-section="{name}">
<a class="skip" href="#main">Skip to the content</a>
<header class="bar">
  <h1><a href="/" class="home">Switchboard</a></h1>
  <span id="live" class="pill" data-state="connecting" role="status">connecting…</span>
  {sign_out}
</header>
{nav}
<main id="main" tabindex="-1">
<h2 id="title">{title}</h2>
<p id="notice" class="notice" role="status" hidden></p>
<noscript><p class="error">These pages need JavaScript: they fetch what they show with this
browser's sign-in key, which only their scripts hold.</p></noscript>
<div id="content" aria-busy="true"><p class="muted">Loading…</p></div>
</main>
</body>
</html>
"""

# scripts a section needs besides common.js and its own
_EXTRA_SCRIPTS = {"usage": ("chart",)}


def section_page(section: Section) -> web.Response:
    scripts = (*_EXTRA_SCRIPTS.get(section.name, ()), section.name)
    return web.Response(
        text=_SHELL.format(
            title=escape(section.title),
            name=section.name,
            nav=nav(section.name),
            sign_out=SIGN_OUT,
            scripts=_script_tags(scripts),
        ),
        content_type="text/html",
        charset="utf-8",
    )


def _script_tags(names: tuple[str, ...]) -> str:
    return "\n".join(f'<script src="/static/control/{s}.js" defer></script>' for s in names)


def framed(section: Section, body: str, *, scripts: tuple[str, ...] = ()) -> str:
    """A section rendered on the server (``body`` is HTML, escaped by its maker) in the
    frame every page shares: the header, the navigation, and ``scripts`` of
    static/control/ that make it handier (it works without them)."""
    text = _SHELL.format(
        title=escape(section.title),
        name=section.name,
        nav=nav(section.name),
        sign_out=SIGN_OUT,
        scripts=_script_tags(scripts),
    )
    loading = '<div id="content" aria-busy="true"><p class="muted">Loading…</p></div>'
    return text.replace(loading, f'<div id="content">{body}</div>')


def section_named(name: str) -> Section:
    return next(s for s in SECTIONS if s.name == name)


def static_page(name: str, current: str) -> web.Response:
    """A page of ``static/`` with the navigation put in at its ``<!--nav-->`` and the
    sign-out at its ``<!--sign-out-->``."""
    text = (STATIC_DIR / name).read_text(encoding="utf-8")
    text = text.replace(NAV_MARK, nav(current)).replace(SIGN_OUT_MARK, SIGN_OUT)
    return web.Response(text=text, content_type="text/html", charset="utf-8")
