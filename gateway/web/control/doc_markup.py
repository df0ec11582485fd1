"""The settings' documentation (the words of docs/configuration.md: markdown) as HTML for
the settings page, with markdown-it-py: code spans are code, web links are links (opened
apart, without a referrer), and a link to another page of docs/ names that file
(``docs/connect.md``), which the web server does not serve. Raw HTML is escaped, never
passed through, and there are no images."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

_MD = MarkdownIt("commonmark", {"html": False}).disable(["image"])
_WEB = ("http://", "https://", "mailto:")
_DOCS_PAGE = re.compile(r"[\w-]+\.md(#[\w-]+)?")


def doc_html(text: str) -> str:
    """One paragraph of documentation as inline HTML (no ``<p>`` around it)."""
    tokens = _MD.parseInline(text)
    for token in tokens:
        if token.children is not None:
            token.children = _links(token.children)
    html: str = _MD.renderer.render(tokens, _MD.options, {})
    return html


def _links(children: list[Token]) -> list[Token]:
    """Web links open apart; a link to a page of docs/ becomes that page's name as code;
    any other link, its words alone. (Links do not nest.)"""
    out: list[Token] = []
    at = 0
    while at < len(children):
        token = children[at]
        if token.type != "link_open":
            out.append(token)
            at += 1
            continue
        end = next(i for i in range(at, len(children)) if children[i].type == "link_close")
        href = str(token.attrGet("href") or "")
        if href.lower().startswith(_WEB):
            token.attrSet("rel", "noopener noreferrer")
            token.attrSet("target", "_blank")
            out.extend(children[at : end + 1])
        elif _DOCS_PAGE.fullmatch(href):
            out.append(Token("code_inline", "code", 0, content=f"docs/{href}"))
        else:
            out.extend(children[at + 1 : end])
        at = end + 1
    return out
