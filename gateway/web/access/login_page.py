"""The pages a browser sees around signing in: how to sign in, a used-up link, and the page
a sign-in answers with, which hands the page key to the origin's storage.

Rendered on the server (the token form appears only where ``web.token`` is set), with every
value escaped; the look comes from ``static/app.css`` like every other page.
"""

from __future__ import annotations

from html import escape

from aiohttp import web

SIGN_IN_HINT = (
    "open the sign-in link that `switchboard run` printed, or run `switchboard web` "
    "(as the user who runs Switchboard) for a new one"
)

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title} · Switchboard</title>
<link rel="stylesheet" href="/static/app.css">
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
{head}</head>
<body class="login-page">
<main class="login">
<h1>Switchboard</h1>
{body}
</main>
</body>
</html>
"""

_LINK_STEPS = """<p>{lead}</p>
<ol>
<li>In the terminal where Switchboard runs, open the sign-in link it printed
(<code>switchboard run</code> prints one when it starts).</li>
<li>Or, as the user who runs Switchboard, run <kbd>switchboard web</kbd> and open the link it
prints. Each link works once, for ten minutes.</li>
</ol>
"""

_ACCESS_FORM = """<form method="post" action="/login">
<p>Or enter the access token (<code>web.token</code>).</p>
{failed}
<label class="sr" for="token">Access token</label>
<input type="password" id="token" name="token" autocomplete="current-password" required>
<input type="hidden" name="next" value="{next_path}">
<button type="submit">Sign in</button>
</form>
"""


_KEY_LOST = (
    '<p class="notice" role="alert">This browser still has its sign-in cookie, but not the '
    "key its pages keep in this site's storage (the site's data was cleared, or this is "
    "another browser profile). A cookie alone opens nothing here, so that no other program "
    "on this machine that gets hold of it can use it. Sign in again to go on.</p>"
)


def login_page(
    *, token_form: bool, failed: bool, next_path: str, key_lost: bool = False
) -> web.Response:
    """GET /login: the ways in (``next_path`` is already a safe local path); ``key_lost``:
    a page found its browser without the page key (``?why=key``) and says so."""
    body = _KEY_LOST if key_lost else ""
    body += _LINK_STEPS.format(lead="Sign in to use the web chat and the control pages.")
    if token_form:
        failed_line = '<p class="error" role="alert">That token is not right.</p>' if failed else ""
        body += _ACCESS_FORM.format(failed=failed_line, next_path=escape(next_path, quote=True))
    return _page("Sign in", body, status=200)


def used_link_page() -> web.Response:
    """A sign-in link that is used up, expired, altered or made before a restart."""
    lead = (
        '<span class="error" role="alert">This sign-in link has been used, has expired or is '
        "not right.</span> Links work once, for ten minutes."
    )
    return _page("Link used", _LINK_STEPS.format(lead=lead), status=403)


def signed_in_page(key: str, next_path: str) -> web.Response:
    """What a sign-in (a link, the login form) answers with: ``static/signin.js`` puts the
    sign-in's page key into the origin's ``localStorage`` and opens ``next_path`` in this
    page's place (a reload or Back does not come here again). The key is only in this
    body: not in a URL (history, logs, the Referer) nor in a cookie (which every port of
    the host gets)."""
    body = (
        f'<div id="signed-in" data-key="{escape(key, quote=True)}" '
        f'data-next="{escape(next_path, quote=True)}">'
        '<p role="status" id="signed-in-state">Signed in; opening Switchboard…</p>'
        '<noscript><p class="error">Switchboard\'s pages need JavaScript: they keep this '
        "sign-in's key and send it with what they ask the server.</p></noscript></div>"
    )
    head = '<script src="/static/signin.js" defer></script>\n'
    return _page("Signed in", body, status=200, head=head)


def _page(title: str, body: str, *, status: int, head: str = "") -> web.Response:
    return web.Response(
        status=status,
        text=_PAGE.format(title=escape(title), body=body, head=head),
        content_type="text/html",
        charset="utf-8",
    )
