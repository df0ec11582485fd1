"""``/settings`` as a plain server-rendered page: one form with an input per key, named by
its dotted key (``name="llm.model"``), grouped by section, each with its documentation and
whether a change applies at once or at the next start.

It works without a script: *Check* says what a change would do (which keys would need a
restart) without saving it; *Save* writes config.toml (a secret: the home's ``.env``) and
applies it; a change that waits for a restart offers one. Every value is escaped; secrets are never put in the page.

Each input carries the value it was shown with (``_was.<key>``), and only the keys whose
value differs from it are sent on: a setting changed elsewhere meanwhile (``config set``,
an editor) is not put back by a form that still shows its old value. After *Check*, or a
*Save* that was refused, the form shows what was typed, still against the values first
shown, so *Save* then saves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from html import escape

from gateway.config.reference.form import FormField, FormSection, saved_in
from gateway.web.pages import framed, section_named
from gateway.web.view import SettingsChange

CHECK, SAVE = "check", "save"  # the form's two buttons (name="_action")
WAS = "_was."  # the value an input was first shown with: name="_was.llm.model"


def edited(form: Mapping[str, str]) -> dict[str, str]:
    """The settings a posted form changes: the inputs whose value is not the one they were
    first shown with (an input without one counts as changed)."""
    return {
        key: value
        for key, value in form.items()
        if not key.startswith("_") and form.get(WAS + key) != value
    }


_PAGE = """<p>Every setting of <code>config.toml</code> (docs/configuration.md). Saving keeps
the file's comments and puts secrets in the home's <code>.env</code> instead; a change applies
at once unless it is marked <em>needs a restart</em>.</p>
{result}
{form}"""


def _framed(result: str, form: str) -> str:
    return framed(section_named("settings"), _PAGE.format(result=result, form=form))


_FORM = """<form method="post" action="/settings">
{sections}
<p class="actions">
<button type="submit" name="_action" value="check">Check</button>
<button type="submit" name="_action" value="save">Save</button>
</p>
</form>"""


def settings_page(
    sections: Sequence[FormSection],
    *,
    result: SettingsChange | None = None,
    checked: bool = False,
    restart_offered: bool = False,
    posted: Mapping[str, str] | None = None,
) -> str:
    """The page, with what the last post did above the form; ``posted``: that form, whose
    values the inputs keep (after a check, or a save that was refused)."""
    posted = posted or {}
    return _framed(
        _result(result, checked=checked, restart_offered=restart_offered),
        _FORM.format(sections="\n".join(_section(s, posted) for s in sections)),
    )


def restarting_page(start: str, ticket: str) -> str:
    """What the browser shows while the gateway restarts. static/control/restarting.js
    posts ``ticket`` (the restart begins: this page has loaded), then waits for a start of
    the gateway other than ``start`` to answer and goes back to the settings."""
    return framed(
        section_named("settings"),
        f'<div id="restarting" data-from="{escape(start, quote=True)}" '
        f'data-ticket="{escape(ticket, quote=True)}" data-back="/settings">'
        '<p role="status" id="restart-state">Restarting: the gateway stops and starts again. '
        "This page goes back to the settings once it answers.</p>"
        '<p><a href="/settings">Back to the settings</a></p></div>',
        scripts=("restarting",),
    )


def restart_refused_page() -> str:
    return _framed(
        '<p class="error" role="alert">Not restarted: this gateway was not started by '
        "<code>switchboard run</code>, so it cannot start itself again. Restart it where it "
        'runs. <a href="/settings">Back to the settings</a></p>',
        "",
    )


def _result(change: SettingsChange | None, *, checked: bool, restart_offered: bool) -> str:
    if change is None:
        return ""
    if change.errors:
        items = "".join(
            f"<li><code>{escape(key or 'settings')}</code>: {escape(why)}</li>"
            for key, why in change.errors.items()
        )
        return f'<div class="error" role="alert"><p>Not saved:</p><ul>{items}</ul></div>'
    if not change.changed:
        return '<p role="status">Nothing changed.</p>'
    lines = []
    verb = "would apply at once" if checked else "applied"
    if change.applied:
        lines.append(f"{verb}: {_keys(change.applied)}")
    if change.restart:
        lines.append(
            f"{'would need' if checked else 'saved; needs'} a restart: {_keys(change.restart)}"
        )
    lines += [escape(p) for p in change.problems]
    body = "".join(f"<li>{line}</li>" for line in lines)
    offer = (
        '<form method="post" action="/api/restart"><button type="submit">Restart now'
        "</button></form>"
        if change.restart and change.saved and restart_offered
        else ""
    )
    lead = "Checked, not saved" if checked else "Saved"
    return f'<div role="status"><p>{lead}.</p><ul>{body}</ul>{offer}</div>'


def _keys(keys: Sequence[str]) -> str:
    return ", ".join(f"<code>{escape(k)}</code>" for k in keys)


def _section(section: FormSection, posted: Mapping[str, str]) -> str:
    fields = "\n".join(_field(f, posted) for f in section.fields)
    doc = f"<p>{escape(section.doc)}</p>" if section.doc else ""
    return (
        f'<fieldset class="group" id="{escape(section.title, quote=True)}">'
        f"<legend>{escape(section.title)}</legend>{doc}\n{fields}\n</fieldset>"
    )


def _field(field: FormField, posted: Mapping[str, str]) -> str:
    key = escape(field.key, quote=True)
    ident = f"setting-{key}"
    notes = ["applies at once" if field.live else "needs a restart"]
    if field.secret:
        notes.append("secret: set, leave empty to keep it" if field.set else "secret: not set")
    if field.set_by is not None:
        notes.append(f"set by {field.set_by}, which wins over {saved_in(field)}")
    if field.default and not field.secret:
        notes.append(f"default {field.default}")
    about = escape(field.doc)
    if field.secret:  # never in the page: empty keeps it
        was = ""
    else:
        shown = posted.get(WAS + field.key, field.value)
        was = f'<input type="hidden" name="{WAS}{key}" value="{escape(shown, quote=True)}">'
        field = replace(field, value=posted.get(field.key, field.value))
    return (
        f'<div class="setting"><label for="{ident}">{escape(field.key)}</label>'
        f'<div class="control">{_input(field, ident)}{was}'
        f"<small>{about} ({escape('; '.join(notes))})</small></div></div>"
    )


def _input(field: FormField, ident: str) -> str:
    name = escape(field.key, quote=True)
    value = escape(field.value, quote=True)
    if field.kind in ("boolean", "choice"):
        options = ("true", "false") if field.kind == "boolean" else field.choices
        blank = '<option value=""></option>' if field.optional else ""
        chosen = "".join(
            f"<option{' selected' if o == field.value else ''}>{escape(o)}</option>"
            for o in options
        )
        return f'<select id="{ident}" name="{name}">{blank}{chosen}</select>'
    if field.kind == "secret":
        hint = "set; leave empty to keep" if field.set else "not set"
        return (
            f'<input type="password" id="{ident}" name="{name}" value="" '
            f'placeholder="{hint}" autocomplete="off">'
        )
    if field.kind == "json":
        return f'<textarea id="{ident}" name="{name}" rows="2">{escape(field.value)}</textarea>'
    mode = ' inputmode="decimal"' if field.kind in ("integer", "number") else ""
    return f'<input type="text" id="{ident}" name="{name}" value="{value}"{mode}>'
