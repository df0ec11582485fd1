"""One setting of the settings page: its input (named by its dotted key, with the value it
was shown with beside it), marks saying where its value comes from and whether a change
waits for a restart, its documentation rendered from markdown, the fields of each item of
a list or table setting, and the error a refused save found in it.

A key the page cannot change (``home``; a key the environment or another source sets over
where the page saves) is shown read-only and has no name: it is never posted. A deprecated
key is left out unless something sets it. A secret's value is never put in the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from html import escape

from gateway.config.explain import Origin
from gateway.config.reference.doc import ItemTable
from gateway.config.reference.form import FormField
from gateway.web.control.doc_markup import doc_html

WAS = "_was."  # the value an input was first shown with: name="_was.llm.model"
CLEAR = "_clear."  # a secret's box that removes it: name="_clear.llm.api_key"

ORIGIN_MARKS = {
    Origin.CONFIG_FILE: "set in config.toml",
    Origin.DOTENV: "set in .env",
    Origin.ENVIRONMENT: "set by the environment",
    Origin.SECRET_FILE: "set by a secret file",
}


def shown(field: FormField) -> bool:
    """Whether the page shows ``field``: a deprecated key only while something sets it."""
    return not field.deprecated or field.origin is not None


def input_id(key: str) -> str:
    return f"setting-{key}"


def setting(field: FormField, posted: Mapping[str, str], error: str | None) -> str:
    """The setting's block; ``posted``: a form whose typed values it keeps."""
    key = escape(field.key, quote=True)
    ident = input_id(key)
    about = f"about-{key}"
    problem = f"error-{key}"
    was = ""
    if field.fixed is None and field.kind != "secret":  # a secret's value is never shown
        first = posted.get(WAS + field.key, field.value)
        was = f'<input type="hidden" name="{WAS}{key}" value="{escape(first, quote=True)}">'
        field = replace(field, value=posted.get(field.key, field.value))
    described = f"{problem} {about}" if error else about
    told = f'<p class="field-error" id="{problem}">{escape(error)}</p>' if error else ""
    remove = ""
    if field.kind == "secret" and field.set and field.fixed is None:
        ticked = " checked" if CLEAR + field.key in posted else ""
        remove = (
            f'<label class="clear"><input type="checkbox" name="{CLEAR}{key}"{ticked}> '
            "Remove this secret</label>"
        )
    origin = f' data-origin="{field.origin.value}"' if field.origin is not None else ""
    return (
        f'<div class="setting" id="field-{key}" data-key="{key}"{origin}>'
        f'<label for="{ident}">{escape(field.key)}</label>'
        f'<div class="control">{_input(field, ident, described, invalid=bool(error))}{was}'
        f"{remove}{told}{_marks(field)}"
        f'<div class="about" id="{about}">{_about(field)}</div>'
        f"{_items(field.items) if field.items is not None else ''}</div></div>"
    )


def _marks(field: FormField) -> str:
    marks = []
    if field.origin is not None:
        marks.append(("origin", ORIGIN_MARKS[field.origin]))
    if field.fixed is not None:
        marks.append(("fixed", "read-only here"))
    if not field.live and field.fixed is None:
        marks.append(("restart", "needs a restart"))
    if field.deprecated:
        marks.append(("deprecated", "deprecated"))
    spans = "".join(f'<span class="mark" data-mark="{kind}">{text}</span>' for kind, text in marks)
    return f'<p class="marks">{spans}</p>'


def _about(field: FormField) -> str:
    """What it means, then what the page adds: why it cannot be changed here, how its
    secret is kept, its default."""
    notes = []
    if field.fixed is not None:
        notes.append(f"Not changed here: {escape(field.fixed)}.")
    if field.kind == "secret":
        kept = (
            "set; leave it empty to keep it, or tick the box to remove it"
            if field.set
            else "not set"
        )
        notes.append(f"A secret, kept in the home's <code>.env</code>, never shown: {kept}.")
    elif field.default:
        notes.append(f"Default: <code>{escape(field.default)}</code>.")
    meta = f'<span class="meta">{" ".join(notes)}</span>' if notes else ""
    return f"{doc_html(field.doc)}{meta}"


def _input(field: FormField, ident: str, described: str, *, invalid: bool) -> str:
    value = escape(field.value, quote=True)
    fixed = field.fixed is not None
    # a field the page cannot change has no name: it is never posted
    named = f'id="{ident}"' + ("" if fixed else f' name="{escape(field.key, quote=True)}"')
    aria = f' aria-describedby="{described}"' + (' aria-invalid="true"' if invalid else "")
    if field.kind in ("boolean", "choice"):
        options = ("true", "false") if field.kind == "boolean" else field.choices
        blank = '<option value=""></option>' if field.optional else ""
        chosen = "".join(
            f"<option{' selected' if o == field.value else ''}>{escape(o)}</option>"
            for o in options
        )
        return f"<select {named}{aria}{' disabled' if fixed else ''}>{blank}{chosen}</select>"
    if field.kind == "secret":
        hint = "set; leave empty to keep" if field.set else "not set"
        return (
            f'<input type="password" {named} value="" placeholder="{hint}" '
            f'autocomplete="off"{aria}{" disabled" if fixed else ""}>'
        )
    readonly = " readonly" if fixed else ""
    if field.kind == "json":
        return f'<textarea {named} rows="2"{aria}{readonly}>{escape(field.value)}</textarea>'
    mode = ' inputmode="decimal"' if field.kind in ("integer", "number") else ""
    return f'<input type="text" {named} value="{value}"{mode}{aria}{readonly}>'


def _items(table: ItemTable) -> str:
    """The fields of each item, for a setting written as a list or table of tables."""
    rows = "".join(
        f'<tr><td data-label="key"><code>{escape(name)}</code></td>'
        f'<td data-label="default">{doc_html(default)}</td>'
        f'<td data-label="meaning">{doc_html(meaning)}</td></tr>'
        for name, default, meaning in table.rows()
    )
    return (
        f'<details class="items"><summary>Fields of each item: <code>{escape(table.title)}'
        f"</code></summary><p>{doc_html(table.doc)} In the environment: "
        f"<code>{escape(table.env)}</code>.</p>"
        '<div class="table-wrap"><table class="cards"><thead><tr><th scope="col">key</th>'
        '<th scope="col">default</th><th scope="col">meaning</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></div></details>"
    )
