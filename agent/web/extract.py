"""Turning a fetched page into text the model can read: HTML becomes markdown with links kept.

HTML goes through trafilatura, which finds the main content (dropping navigation, footers,
scripts and styles) and writes markdown with links made absolute against the page URL.
It costs about a quarter of a second to import, so it is imported on first use; callers
run these functions in a worker thread because lxml parsing is CPU-bound.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass

from agent.web.fetch import Page

MAX_TITLE_CHARS = 200


@dataclass(frozen=True, slots=True)
class Extracted:
    title: str | None
    text: str


def decode(body: bytes, charset: str | None) -> str:
    """Text of a body in its declared charset (UTF-8 when none or unknown), never failing."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def html_to_markdown(html: str | bytes, *, url: str) -> Extracted:
    """The page's main content as markdown, with its links; bytes let trafilatura detect the encoding."""
    import trafilatura  # noqa: PLC0415 - heavy (lxml, dateparser); imported on first fetch

    tree = trafilatura.load_html(html)
    if tree is None:
        return Extracted(None, "")
    title = " ".join((tree.findtext(".//title") or "").split())[:MAX_TITLE_CHARS] or None
    text = trafilatura.extract(
        tree,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_formatting=True,
        include_images=False,
        include_comments=False,
        favor_recall=True,  # an agent reading a page would rather see too much than too little
    )
    if not text:  # too little for the main-content heuristics: take all visible text
        text = trafilatura.html2txt(html)
    return Extracted(title, (text or "").strip())


def page_text(page: Page) -> Extracted:
    """Readable text of any page the fetcher accepted."""
    if page.kind == "html":
        html = decode(page.body, page.charset) if page.charset else page.body
        return html_to_markdown(html, url=page.url)
    text = decode(page.body, page.charset)
    if page.kind == "json" and not page.truncated:
        with contextlib.suppress(ValueError):  # served as JSON but is not: show it as is
            text = json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    return Extracted(None, text.strip())


LITTLE_TEXT = 200  # characters of main text below which a page is treated as a shell
SOME_TEXT = 1_500  # below this, a sign that the page needs scripts decides
_NEEDS_SCRIPTS = (
    # "You need to enable JavaScript to run this app." and friends
    re.compile(
        rb"<noscript[^>]*>[^<]{0,400}(?:enable|requires?|needs?|turn on)[^<]{0,80}javascript", re.I
    ),
    # an empty mount point of a single-page app (React, Vue, Next, Nuxt, Svelte, Angular)
    re.compile(
        rb"<(?:div|main)[^>]+id=[\"']?(?:root|app|__next|__nuxt|svelte|main-app)[\"']?[^>]*>\s*</(?:div|main)>",
        re.I,
    ),
    re.compile(rb"<(?:app-root|ng-app)[^>]*>\s*</", re.I),
)


def needs_scripts(html: bytes, text: str) -> bool:
    """Whether a page read without running scripts probably lacks its content.

    Too little main text, or not much text together with an empty single-page-app mount
    point or a ``<noscript>`` asking for JavaScript.
    """
    size = len(text.strip())
    if size < LITTLE_TEXT:
        return True
    return size < SOME_TEXT and any(p.search(html) for p in _NEEDS_SCRIPTS)
