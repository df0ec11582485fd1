"""The form of ``/settings``, rendered on the server: one form with an input per key, named
by its dotted key (``name="llm.model"``), grouped by section, each with its documentation
and whether a change applies at once or at the next start (one setting's markup:
:mod:`gateway.web.control.settings_fields`).

The page itself is a shell that holds no setting (a navigation carries no page key:
gateway/web/access/security.py); static/control/settings.js fetches this form from
``/api/settings/form`` with the page key, puts it in the page, and posts it back there:
*Check* says what a change would do (which keys would need a restart) without saving it;
*Save* writes config.toml (a secret: the home's ``.env``) and applies it; a change that
waits for a restart offers one. Every value is escaped; secrets are never put in the form.
Sections are ``<details>``: the ones in use open, the others closed, the chat platforms
not set up together in one; an index beside them leads to each. A refused save is listed
above the form, each problem linking to its field, and told again under the field itself.
The script also adds a filter over keys and descriptions, and the count of unsaved changes
in the bar that holds the buttons.

Each input carries the value it was shown with (``_was.<key>``), and only the keys whose
value differs from it are sent on: a setting changed elsewhere meanwhile (``config set``,
an editor) is not put back by a form that still shows its old value. After *Check*, or a
*Save* that was refused, the form shows what was typed, still against the values first
shown, so *Save* then saves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from gateway.config.reference.form import FormSection
from gateway.web.control.doc_markup import doc_html
from gateway.web.control.settings_fields import CLEAR, WAS, input_id, setting, shown
from gateway.web.pages import framed, section_named
from gateway.web.view import SettingsChange

CHECK, SAVE = "check", "save"  # the form's two buttons (name="_action")
CHANNELS_OFF = "channels-not-set-up"  # the section holding the chat platforms not set up


def edited(form: Mapping[str, str]) -> dict[str, str]:
    """The settings a posted form changes: the inputs whose value is not the one they were
    first shown with (an input without one counts as changed)."""
    return {
        key: value
        for key, value in form.items()
        if not key.startswith("_") and form.get(WAS + key) != value
    }


def cleared(form: Mapping[str, str]) -> list[str]:
    """The secrets a posted form removes (their box ticked)."""
    return [key.removeprefix(CLEAR) for key in form if key.startswith(CLEAR)]


_PAGE = """<p>Every setting of <code>config.toml</code> (docs/configuration.md). Saving keeps
the file's comments and puts secrets in the home's <code>.env</code> instead; a change applies
at once unless it is marked <em>needs a restart</em>. The sections in use are open.</p>
{result}
{form}"""


_FORM = """<form method="post" action="/settings" class="settings">
<div class="settings-layout">
<nav class="settings-index" aria-label="Sections of the settings">
<div class="finder" hidden>
<label for="settings-filter">Find a setting</label>
<input type="search" id="settings-filter" placeholder="a key or words of its description"
 autocomplete="off">
<label class="only"><input type="checkbox" id="settings-only-set"> only those set or changed</label>
<p class="hint" id="settings-found" role="status"></p>
</div>
<details class="index" open><summary>Sections</summary><ol>{index}</ol></details>
</nav>
<div class="settings-sections">
{sections}
</div>
</div>
<div class="savebar">
<p class="hint" id="settings-unsaved" aria-live="polite"></p>
<button type="submit" name="_action" value="check" class="secondary">Check</button>
<button type="submit" name="_action" value="save">Save</button>
</div>
</form>"""


def settings_form(
    sections: Sequence[FormSection],
    *,
    result: SettingsChange | None = None,
    checked: bool = False,
    restart_offered: bool = False,
    posted: Mapping[str, str] | None = None,
) -> str:
    """The page's content (without its frame), with what the last post did above the
    form; ``posted``: that form, whose values the inputs keep (after a check, or a save
    that was refused)."""
    posted = posted or {}
    errors = result.errors if result is not None else {}
    shown_keys = {f.key for s in sections for f in s.fields if shown(f)}
    # typed on the page (a secret's empty input is not: it keeps the secret)
    typed = {key for key, value in edited(posted).items() if value or WAS + key in posted}
    typed.update(cleared(posted))
    on = [s for s in sections if not s.channel or s.in_use]
    off = [s for s in sections if s.channel and not s.in_use]

    def opened(section: FormSection) -> bool:
        keys = {f.key for f in section.fields}
        return section.in_use or bool(keys & (set(errors) | typed))

    groups = [_group(s, posted, errors, open_=opened(s)) for s in on]
    index = [_entry(s) for s in on]
    if off:
        inner = "\n".join(_group(s, posted, errors, open_=opened(s)) for s in off)
        names = ", ".join(s.title for s in off)
        groups.append(
            f'<details class="group channels-off" id="section-{CHANNELS_OFF}"'
            f"{' open' if any(opened(s) for s in off) else ''}>"
            f'<summary><h3 class="name">Channels not set up</h3>'
            f'<span class="tally">{escape(names)}</span></summary>'
            '<p class="section-doc">A channel starts once what it needs is set here (its '
            "token or address), or with <code>switchboard onboard --channel NAME</code>, "
            "which checks it (docs/channels.md).</p>"
            f"{inner}</details>"
        )
        index.append(f'<li><a href="#section-{CHANNELS_OFF}">Channels not set up</a></li>')
    return _PAGE.format(
        result=_result(result, checked=checked, restart_offered=restart_offered, shown=shown_keys),
        form=_FORM.format(index="".join(index), sections="\n".join(groups)),
    )


def _section_id(section: FormSection) -> str:
    return "section-" + section.title.replace(" ", "-")


def _entry(section: FormSection) -> str:
    ident = escape(_section_id(section), quote=True)
    return f'<li><a href="#{ident}">{escape(section.title)}</a></li>'


def _group(
    section: FormSection, posted: Mapping[str, str], errors: Mapping[str, str], *, open_: bool
) -> str:
    fields = [f for f in section.fields if shown(f)]
    body = "\n".join(setting(f, posted, errors.get(f.key)) for f in fields)
    doc = f'<p class="section-doc">{doc_html(section.doc)}</p>' if section.doc else ""
    count = sum(f.origin is not None for f in fields)
    tally = f"{count} set" if count else "all defaults"
    return (
        f'<details class="group" id="{escape(_section_id(section), quote=True)}"'
        f"{' open' if open_ else ''}>"
        f'<summary><h3 class="name">{escape(section.title)}</h3>'
        f'<span class="tally">{tally}</span></summary>{doc}\n{body}\n</details>'
    )


def restarting_page(start: str, ticket: str) -> str:
    """What the browser shows while the gateway restarts. static/control/restarting.js
    posts ``ticket`` (the restart begins: this page has loaded), then waits for a start of
    the gateway other than ``start`` to answer and goes back to the settings. A page shell
    (it holds only what its own address says), so a reload opens it without the key."""
    return framed(
        section_named("settings"),
        f'<div id="restarting" data-from="{escape(start, quote=True)}" '
        f'data-ticket="{escape(ticket, quote=True)}" data-back="/settings">'
        '<p role="status" id="restart-state">Restarting: the gateway stops and starts again. '
        "This page goes back to the settings once it answers.</p>"
        '<p><a href="/settings">Back to the settings</a></p></div>',
        scripts=("restarting",),
    )


def _result(
    change: SettingsChange | None, *, checked: bool, restart_offered: bool, shown: set[str]
) -> str:
    if change is None:
        return ""
    if change.errors:
        items = "".join(
            _problem(key, why, linked=key in shown) for key, why in change.errors.items()
        )
        count = len(change.errors)
        return (
            '<div class="error-summary" id="settings-problems" role="alert" tabindex="-1">'
            f"<p><strong>Not saved:</strong> {'one setting needs' if count == 1 else f'{count} settings need'} "
            f"a change.</p><ul>{items}</ul></div>"
        )
    if not change.changed:
        return '<p class="notice" role="status">Nothing changed.</p>'
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
        '<form method="post" action="/api/restart" class="restart"><button type="submit">'
        "Restart now</button></form>"
        if change.restart and change.saved and restart_offered
        else ""
    )
    lead = "Checked, not saved" if checked else "Saved"
    return f'<div class="notice" role="status"><p>{lead}.</p><ul>{body}</ul>{offer}</div>'


def _problem(key: str, why: str, *, linked: bool) -> str:
    """One refused key, linking to its field where the page shows it."""
    if not key:
        return f"<li>{escape(why)}</li>"
    name = f"<code>{escape(key)}</code>"
    if linked:
        name = f'<a href="#{escape(input_id(key), quote=True)}">{name}</a>'
    return f"<li>{name}: {escape(why)}</li>"


def _keys(keys: Sequence[str]) -> str:
    return ", ".join(f"<code>{escape(k)}</code>" for k in keys)
