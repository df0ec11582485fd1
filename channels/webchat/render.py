"""Markdown to safe HTML for the web chat, read as every formatting channel reads it
(:mod:`channels._markdown`: CommonMark, and what is not markup shown as written).

Raw HTML in model output is escaped, never passed through, so ``<script>`` shows as text.
Links keep only http(s) and mailto targets and open in a new tab without a referrer.
Images are not rendered: an image URL in an answer would make the browser fetch it, which
is a way to leak data to a stranger's server (it becomes a plain link instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from channels._markdown import markdown


def _link_open(
    renderer: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: EnvType,
) -> str:
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    tokens[idx].attrSet("target", "_blank")
    return renderer.renderToken(tokens, idx, options, env)


def _list_item_open(
    renderer: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: EnvType,
) -> str:
    """A task item (its box ☐/☑ starts its text) is marked, so the page shows no bullet."""
    if tokens[idx].meta.get("task"):
        tokens[idx].attrSet("class", "task")
    return renderer.renderToken(tokens, idx, options, env)


def _build() -> MarkdownIt:
    md = markdown()
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("list_item_open", _list_item_open)
    return md


_MD = _build()


def render_markdown(text: str) -> str:
    """HTML for an assistant message; safe to insert into the page as markup."""
    html: str = _MD.render(text)
    return html


def public(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry as the page gets it: no server paths; assistant text also as safe HTML."""
    out = {k: v for k, v in entry.items() if k != "files"}
    out["files"] = [
        {"name": f.get("name"), "kind": f.get("kind"), "size": f.get("size"), "index": i}
        for i, f in enumerate(entry.get("files", []))
    ]
    if entry.get("role") == "assistant":
        out["html"] = render_markdown(str(entry.get("text", "")))
    return out
