"""The settings as a form: every key of the reference (docs/configuration.md), grouped by
section, with its value as a form shows and posts it, its type, allowed values,
documentation and whether a running gateway applies it at once; and the values a form
posts back, turned into the changes to write.

A form posts every field as text, keyed by its dotted key (``llm.model``): numbers and
words as typed, ``true``/``false`` (or ``on``) for switches, lists as JSON or
comma-separated (``a, b``), tables and lists of tables as JSON. Only fields whose text
differs from what the form showed are changes, so a form posted whole writes only what the
person changed. Secrets are never shown: their field is empty (``set`` says whether one is
configured), and an empty or masked secret leaves it as it is; one is removed only when
asked by name (``clear``). Tables that hold secrets
show them masked, and a change that still holds the mask is refused (the secret would be
lost). A change is saved in config.toml, a secret's in the home's ``.env``
(:mod:`gateway.config.env_file`). A key that a source winning over that file sets (the
environment; for config.toml also ``.env`` and secret files) cannot be changed here, so a
change to it is refused naming where to change it, as is ``home`` (config.toml is in it):
such a field is ``fixed``. Each field says where its value comes from (``origin``), and a
section whether it is in use: a chat platform's when the channel is set up, another when
one of its keys is set.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError

from gateway.config.explain import Origin, Sources
from gateway.config.reference.doc import ItemTable, KeyDoc, item_tables, key_docs
from gateway.config.settings import Settings
from gateway.config.toml.config_file import UNSET
from gateway.config.toml.edit import inline

MASK = "**********"

Kind = Literal["text", "integer", "number", "boolean", "choice", "list", "json", "secret"]
_TRUE = frozenset({"true", "on", "yes", "1"})
_FALSE = frozenset({"false", "off", "no", "0", ""})


@dataclass(frozen=True, slots=True)
class FormField:
    key: str  # the dotted key, the input's name: "llm.model"
    kind: Kind
    value: str  # as the form shows and posts it ("" for a secret)
    default: str  # the default, as text
    choices: tuple[str, ...]  # allowed values of a choice (or of a list's items)
    optional: bool  # may be left empty: unset, the default or nothing applies
    doc: str  # what it means (docs/configuration.md)
    env: str  # the environment variable that sets it too
    live: bool  # a running gateway applies a change at once; else at its next start
    secret: bool
    set: bool  # it has a value (the only thing told of a secret)
    set_by: str | None  # a source that wins over where it is saved (the form cannot change it)
    origin: Origin | None  # where its value comes from; None: the default
    fixed: str | None  # why the form cannot change it ("set by ...: change it there")
    deprecated: bool  # replaced by another key (its doc says which)
    items: ItemTable | None  # the fields of each of its items (a list or table of tables)


@dataclass(frozen=True, slots=True)
class FormSection:
    title: str  # "llm", "tools.exec", a channel's name, "top level"
    doc: str
    fields: tuple[FormField, ...]
    channel: bool  # a chat platform's section ([telegram], ...)
    in_use: bool  # a channel set up; another section: one of its keys is set


def settings_form(settings: Settings, sources: Sources) -> list[FormSection]:
    """Every key of the reference with its value in ``settings``."""
    channels = settings.channel_sections()
    items = {table.key: table for table in item_tables()}
    sections = []
    for section in key_docs():
        fields = tuple(
            _field(doc, _value_at(settings, doc.key), sources, items.get(doc.key))
            for doc in section.keys
        )
        channel = channels.get(section.title)
        sections.append(
            FormSection(
                section.title,
                section.doc,
                fields,
                channel=channel is not None,
                # home: SWITCHBOARD_HOME sets it for every home but the default one
                in_use=channel.enabled
                if channel is not None
                else any(f.origin is not None for f in fields if f.key != "home"),
            )
        )
    return sections


def form_edits(
    settings: Settings,
    sources: Sources,
    values: Mapping[str, str],
    clear: Collection[str] = (),
) -> tuple[dict[str, Any], dict[str, str]]:
    """The changes in ``values`` (a posted form) and the secrets to remove (``clear``) as
    edits of config.toml (dotted key: TOML value, or ``UNSET`` to take it out; a secret's
    go to .env), and the fields refused, with why (nothing should be written when there is
    one)."""
    fields = {f.key: f for section in settings_form(settings, sources) for f in section.fields}
    docs = {doc.key: doc for section in key_docs() for doc in section.keys}
    edits: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key, text in values.items():
        field = fields.get(key)
        if field is None:
            errors[key] = "unknown key (see docs/configuration.md)"
            continue
        if _unchanged(field, text):
            continue
        if field.fixed is not None:
            errors[key] = field.fixed
            continue
        try:
            edits[key] = _edit(field, docs[key], text)
        except ValueError as exc:
            errors[key] = str(exc)
    for key in clear:
        field = fields.get(key)
        if field is None or field.kind != "secret":
            errors[key] = "only a secret is removed this way: empty its field to unset it"
        elif key in edits:
            errors[key] = "typed anew and marked to be removed: keep one of the two"
        elif field.fixed is not None:
            errors[key] = field.fixed
        elif field.origin is Origin.SECRET_FILE:
            errors[key] = "a secret file sets it: delete that file to remove it"
        elif field.set:
            edits[key] = UNSET
    return edits, errors


# -- reading ---------------------------------------------------------------------------


def _field(doc: KeyDoc, value: Any, sources: Sources, items: ItemTable | None) -> FormField:
    kind, choices = _kind(doc.annotation, secret=doc.secret)
    loc = tuple(doc.key.split("."))
    # A secret is saved in .env, which wins over secret files and config.toml.
    below: tuple[str, ...] = (str(sources.config_file),)
    if doc.secret:
        below = (*below, str(sources.dotenv_file), "secret file")
    winners = [o for o in sources.origins(loc) if not o.startswith(below)]
    set_by = winners[0] if winners else None
    saved = ".env" if doc.secret else "config.toml"
    if doc.key == "home":
        fixed: str | None = "config.toml is in the home: set SWITCHBOARD_HOME to move it"
    elif set_by is not None:
        fixed = f"set by {set_by}, which wins over {saved}: change it there"
    else:
        fixed = None
    return FormField(
        key=doc.key,
        kind=kind,
        value="" if kind == "secret" else _text(value, kind),
        default="" if doc.secret else _text(_default(doc.default), kind),
        choices=choices,
        optional=_optional(doc.annotation),
        doc=doc.meaning,
        env=doc.env,
        live=doc.live,
        secret=doc.secret,
        set=value is not None and value not in ((), {}, ""),
        set_by=set_by,
        origin=sources.origin(loc),
        fixed=fixed,
        deprecated=doc.deprecated,
        items=items,
    )


def _value_at(settings: BaseModel, dotted: str) -> Any:
    current: Any = settings
    for part in dotted.split("."):
        current = getattr(current, part)
    return current


def _default(value: Any) -> Any:
    return None if type(value).__name__ == "PydanticUndefinedType" else value


def _kind(annotation: Any, *, secret: bool) -> tuple[Kind, tuple[str, ...]]:
    if secret and _bare(annotation) is SecretStr:
        return "secret", ()
    bare = _bare(annotation)
    if bare is bool:
        return "boolean", ()
    if bare is int:
        return "integer", ()
    if bare is float:
        return "number", ()
    if bare in (str, Path):
        return "text", ()
    words = _choices(bare)
    if words:
        return "choice", words
    if typing.get_origin(bare) is tuple:
        item = typing.get_args(bare)[0]
        if _bare(item) is str or _choices(_bare(item)):
            return "list", _choices(_bare(item))
    return "json", ()


def _bare(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            others = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(others) != 1:
                return annotation
            annotation = others[0]
        else:
            return annotation


def _choices(annotation: Any) -> tuple[str, ...]:
    if typing.get_origin(annotation) is Literal:
        return tuple(str(a) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return tuple(member.value for member in annotation)
    return ()


def _optional(annotation: Any) -> bool:
    annotation = typing.get_args(annotation)[0] if _annotated(annotation) else annotation
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(
        None
    ) in typing.get_args(annotation)


def _annotated(annotation: Any) -> bool:
    return typing.get_origin(annotation) is typing.Annotated


def _text(value: Any, kind: Kind) -> str:
    if value is None:
        return ""
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "list":
        items = [str(item) for item in value]
        return json.dumps(items) if any("," in i for i in items) else ", ".join(items)
    if kind == "json":
        return json.dumps(_plain(value))
    return str(value)


def _plain(value: Any) -> Any:
    """Plain data, secrets masked."""
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, BaseModel):
        return {k: _plain(getattr(value, k)) for k in type(value).model_fields}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


# -- writing ---------------------------------------------------------------------------


def _unchanged(field: FormField, text: str) -> bool:
    if field.kind == "secret":
        return text in ("", MASK)
    if field.kind == "boolean":
        return _switch(field, text) == field.value
    if field.kind in ("list", "json"):
        try:
            return bool(_parsed(field, text) == _parsed(field, field.value))
        except ValueError:
            return False
    if field.kind in ("integer", "number"):
        try:
            return float(text) == float(field.value)
        except ValueError:
            return text.strip() == field.value.strip()
    return text.strip() == field.value.strip()


def _switch(field: FormField, text: str) -> str:
    """A switch as posted: "true", "false", or "" (unset, where it may be: a switch whose
    default depends on where, like ``streaming``). An unchecked box posts nothing: false."""
    word = text.strip().lower()
    if not word:
        return "" if field.optional else "false"
    return "true" if word in _TRUE else "false" if word in _FALSE else word


def _edit(field: FormField, doc: KeyDoc, text: str) -> Any:
    """The value to write for ``text``, checked against the key's type."""
    stripped = text.strip()
    if field.kind == "secret":
        return stripped
    if field.kind == "boolean":
        if stripped.lower() not in _TRUE | _FALSE:
            raise ValueError(f"{text!r} is not true or false")
        switch = _switch(field, text)
        return UNSET if not switch else switch == "true"
    if not stripped and field.kind != "text":
        return UNSET  # the default applies again
    if not stripped and field.optional:
        return UNSET
    value: Any = _parsed(field, text) if field.kind in ("list", "json") else stripped
    if field.kind == "json" and MASK in json.dumps(value):
        raise ValueError(
            f"it still holds {MASK} where a secret was: type the secret values again, or "
            "change it in config.toml"
        )
    try:
        typed = TypeAdapter(doc.annotation).validate_python(value)
    except ValidationError as exc:
        raise ValueError("; ".join(e["msg"] for e in exc.errors())) from None
    if field.kind in ("list", "json"):
        return inline(value)  # as typed, on one line (the whole configuration checks it)
    return TypeAdapter(doc.annotation).dump_python(typed, mode="json")


def _parsed(field: FormField, text: str) -> Any:
    stripped = text.strip()
    if field.kind == "list" and not stripped.startswith("["):
        return [part.strip() for part in stripped.split(",") if part.strip()]
    if not stripped:
        return [] if field.kind == "list" else None
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        hint = "; or write a, b, c" if field.kind == "list" else ""
        raise ValueError(f"not valid JSON ({exc.msg}){hint}") from None


def sections_json(sections: Sequence[FormSection]) -> list[dict[str, Any]]:
    """The form as plain data (``GET /api/settings``)."""
    return [
        {
            "title": section.title,
            "doc": section.doc,
            "channel": section.channel,
            "in_use": section.in_use,
            "fields": [_field_json(field) for field in section.fields],
        }
        for section in sections
    ]


def _field_json(field: FormField) -> dict[str, Any]:
    data = {f.name: getattr(field, f.name) for f in fields(FormField) if f.name != "items"}
    table = field.items
    data["items"] = (
        None
        if table is None
        else {
            "title": table.title,
            "doc": table.doc,
            "fields": [
                {"key": name, "default": default, "meaning": meaning}
                for name, default, meaning in table.rows()
            ],
        }
    )
    return data
