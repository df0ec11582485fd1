"""Whether a ``browser`` action commits something: what waits for the owner's approval.

An action commits when it sends something of ours to a site or spends something there:

- a click (or Enter, or Space) that sends a form with any method but GET (a search) or
  ``dialog``, unless the form is a sign-in (it has a password field) and its button does not
  read like a commitment; Enter or Space with the focus inside a frame (what it reaches
  cannot be read from here);
- a click on a button, or anything but a plain link, that reads like a purchase, a payment
  or another commitment ("Buy", "Pay", "Place order", "Subscribe", "Confirm", "Delete"...),
  whatever its script does;
- text typed that is not in the person's own words of this turn: a page's scripts can read a
  field as it is typed, so typing is sending (private data from memory, files or another
  page must be seen by the owner before a site gets it);
- a download: the file is sent to the chat.

The facts are read from the page (:data:`FACTS`) just before the action and again just
before it runs. They describe what the page's DOM says the element does; a page built to
deceive can still run a script on any click, which is why sites are allowed one by one
(``tools.browser.allowed_sites``) and docs/security.md names the limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

Action = Literal[
    "open",
    "snapshot",
    "click",
    "type",
    "select",
    "press",
    "scroll",
    "back",
    "wait_for",
    "download",
    "close",
]
MAX_VALUE_CHARS = 200  # of one field's value, as approvers see it

# Read in the page for the element an action targets (a function of that element).
FACTS = """
(el) => {
  const clean = (s) => String(s || '').replace(/\\s+/g, ' ').trim().slice(0, 200);
  const tag = el.tagName.toLowerCase();
  const type = (Element.prototype.getAttribute.call(el, 'type') || '').toLowerCase();
  const plain = ['button', 'checkbox', 'radio', 'submit', 'image', 'reset', 'file',
                 'hidden', 'range', 'color'];
  const textual = (tag === 'input' && !plain.includes(type)) || tag === 'textarea';
  const submitter = (tag === 'button' && (type === '' || type === 'submit')) ||
                    (tag === 'input' && (type === 'submit' || type === 'image'));
  const label = el.labels && el.labels.length ? el.labels[0].innerText : '';
  const own = textual || tag === 'select' ? label || el.getAttribute('placeholder') ||
    el.getAttribute('name') : tag === 'input' ? el.value || el.getAttribute('alt') : el.innerText;
  const name = clean(el.getAttribute('aria-label') || own || el.getAttribute('title') ||
    el.getAttribute('alt'));
  // A form's own properties can be shadowed by its fields (<input name="action">):
  // read them through the prototypes instead.
  const attr = (node, key) => Element.prototype.getAttribute.call(node, key);
  let form = null;
  const owner = el.form || null;
  if (owner) {
    const sender = submitter ? el : null;
    const method = ((sender && attr(sender, 'formmethod')) || attr(owner, 'method') ||
                    'get').toLowerCase();
    const action = (sender && attr(sender, 'formaction')) || attr(owner, 'action') || '';
    const controls = Object.getOwnPropertyDescriptor(HTMLFormElement.prototype, 'elements')
      .get.call(owner);
    const secret = new Set(Array.from(controls).filter((c) => c.type === 'password')
                           .map((c) => c.name));
    const fields = [];
    for (const [key, value] of new FormData(owner)) {
      const shown = typeof value === 'string' ? value : '(file ' + value.name + ')';
      fields.push([key, secret.has(key) ? '(password)' : shown.slice(0, 200)]);
    }
    let target = action;
    try { target = new URL(action, document.baseURI).href; } catch (e) {}
    form = {method, action: target, fields, sign_in: secret.size > 0};
  }
  return {page: location.href, tag, type, name, textual, submitter, form,
          href: tag === 'a' && el.href ? String(el.href) : ''};
}
"""

# Words a button that commits usually says (whole words; plural and -ed/-ing forms count).
COMMIT_WORDS = (
    "buy",
    "purchase",
    "pay",
    "payment",
    "checkout",
    "check out",
    "place order",
    "order now",
    "complete order",
    "confirm",
    "subscribe",
    "donate",
    "transfer",
    "send money",
    "book now",
    "delete",
    "sign up",
    "register",
)
_COMMIT = re.compile(
    r"(?<!\w)(?:"
    + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in COMMIT_WORDS)
    + r")(?:s|es|d|ed|ing)?(?!\w)",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")
ACTIVATING_KEYS = frozenset({"Enter", " ", "Space"})


@dataclass(frozen=True, slots=True)
class FormFacts:
    method: str  # get, post, dialog...
    action: str  # where it is sent (absolute)
    sign_in: bool  # it has a password field
    fields: tuple[tuple[str, str], ...]  # what it sends (passwords shown as "(password)")


@dataclass(frozen=True, slots=True)
class Target:
    """What the page says about the element an action targets."""

    page: str  # the address of the page (or frame) it is in
    tag: str
    type: str
    name: str  # what it says (label, text, value)
    textual: bool  # a text field
    submitter: bool  # a form's submit button
    form: FormFacts | None  # the form it belongs to
    href: str = ""  # a link's target

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Target:
        form = raw.get("form")
        return cls(
            page=str(raw.get("page", "")),
            tag=str(raw.get("tag", "")),
            type=str(raw.get("type", "")),
            name=str(raw.get("name", "")),
            textual=bool(raw.get("textual")),
            submitter=bool(raw.get("submitter")),
            href=str(raw.get("href", "")),
            form=None
            if not isinstance(form, Mapping)
            else FormFacts(
                method=str(form.get("method", "get")),
                action=str(form.get("action", "")),
                sign_in=bool(form.get("sign_in")),
                fields=tuple((str(k), str(v)) for k, v in form.get("fields", ())),
            ),
        )

    @property
    def label(self) -> str:
        kind = (
            "link"
            if self.tag == "a"
            else "button"
            if self.submitter or self.tag == "button" or self.type in ("button", "reset")
            else "text field"
            if self.textual
            else "list"
            if self.tag == "select"
            else self.type or self.tag
        )
        return f'{kind} "{self.name}"' if self.name else kind


@dataclass(frozen=True, slots=True)
class Commitment:
    """Why an action commits something (our own words), and what it acts on as the page
    describes it (shown to approvers inside the verbatim block, compared before it runs)."""

    reason: str
    reach: str
    sites: tuple[str, ...]  # where it goes: the page, and a form's destination


def commitment(
    action: Action,
    target: Target | None,
    *,
    page: str,
    text: str = "",
    own_words: Iterable[str] = (),
) -> Commitment | None:
    """Whether ``action`` on ``target`` (on ``page``) commits something; None when not."""
    if action == "download":
        where = target.href or target.page if target is not None else page
        reach = f"page: {page}\nfile from: {where}" + _element(target)
        return Commitment("it downloads a file, which is then sent to the chat", reach, (page,))
    if target is None:
        return None
    form = target.form
    if action == "type":
        if in_own_words(text, own_words):
            return None
        reach = f"page: {target.page}{_element(target)}"
        sites: tuple[str, ...] = (target.page,)
        if form is not None:
            reach += f"\nin a form sent by {form.method.upper()} to {form.action}"
            sites += (form.action,)
        return Commitment(
            "the text is not in the user's own words of this turn, and a page can read what "
            "is typed into it",
            reach,
            sites,
        )
    activates = action == "click" or (action == "press" and text in ACTIVATING_KEYS)
    if action == "press" and activates and target.tag in ("iframe", "frame"):
        reach = f"page: {target.page}\nkey: {text} inside a frame"
        return Commitment(
            "the key goes to an element inside a frame, which cannot be checked", reach, (page,)
        )
    sends = form is not None and (
        (activates and target.submitter)
        or (action == "press" and text == "Enter" and target.textual)
    )
    signing_in = form is not None and form.sign_in and not reads_like_commitment(target.name)
    if sends and form is not None and form.method not in ("get", "dialog") and not signing_in:
        return Commitment(
            "it sends a form to the site", _form_reach(target, form), (target.page, form.action)
        )
    if activates and target.tag != "a" and reads_like_commitment(target.name):
        reach = f"page: {target.page}{_element(target)}"
        return Commitment(
            "it reads like a purchase, a payment or another commitment", reach, (target.page,)
        )
    return None


def reads_like_commitment(name: str) -> bool:
    return bool(_COMMIT.search(name))


def in_own_words(text: str, own_words: Iterable[str]) -> bool:
    """Whether every word of ``text`` is one the person wrote in this turn."""
    said = {w.lower() for words in own_words for w in _WORD.findall(words)}
    return all(w.lower() in said for w in _WORD.findall(text))


def site_allowed(url: str, sites: Iterable[str]) -> bool:
    """Whether ``url``'s host is one of ``sites`` or below one (``tools.browser.allowed_sites``)."""
    try:
        host = (URL(url).host or "").lower().rstrip(".")
    except ValueError:
        return False
    return bool(host) and any(host == s or host.endswith(f".{s}") for s in sites)


def _element(target: Target | None) -> str:
    return "" if target is None else f"\nelement: {target.label}"


def _form_reach(target: Target, form: FormFacts) -> str:
    lines = [
        f"page: {target.page}",
        f"element: {target.label}",
        f"sends: {form.method.upper()} {form.action}",
    ]
    lines += [f"  {name}: {_shown(value)}" for name, value in form.fields]
    if not form.fields:
        lines.append("  (no fields)")
    return "\n".join(lines)


def _shown(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= MAX_VALUE_CHARS else flat[:MAX_VALUE_CHARS] + "…"
