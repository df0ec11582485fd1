"""Change one key of config.toml and keep everything else as the person wrote it (comments,
order, blank lines).

tomlkit replaces a key that exists in place. A new key goes right under its table's own
lines (before the first blank line after them), not after the commented-out example of the
next section that tomlkit would consider part of the table; a new table goes at the end.
Each result is parsed again and must hold the new value.
"""

from __future__ import annotations

import json
import re
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.items import AoT, Table
from tomlkit.toml_document import TOMLDocument

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY_LINE = re.compile(r"^\s*[A-Za-z0-9_\"'-]")


def parse_value(text: str) -> Any:
    """A command-line value as TOML (``42``, ``true``, ``["a", "b"]``, ``"x"``), else as JSON
    (``[{"name": "laptop", "role": "owner"}]``, as environment variables take lists and
    tables), or else the text itself as a string (``gpt-4o`` needs no quotes). Raises
    :class:`ValueError` for JSON that TOML cannot hold (``null``)."""
    try:
        return tomlkit.parse(f"value = {text}")["value"]
    except ParseError:
        pass
    if text.lstrip()[:1] in ("[", "{"):
        try:
            return inline(json.loads(text))
        except json.JSONDecodeError:
            pass
    return text


def inline(value: Any) -> Any:
    """Plain data as TOML written on one line: tables inline (``{ name = "a" }``), also
    inside lists, where tomlkit would make ``[[name]]`` tables of them."""
    if value is None:
        raise ValueError("TOML has no null: leave the key out instead")
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for key, item in value.items():
            table[str(key)] = inline(item)
        return table
    if isinstance(value, list | tuple):
        array = tomlkit.array()
        array.extend(inline(item) for item in value)
        return array
    return value


def get_key(text: str, dotted: str) -> Any:
    """The value at ``dotted`` in the TOML text, or None."""
    current: Any = tomlkit.parse(text)
    for name in dotted.split("."):
        if not isinstance(current, dict) or name not in current:
            return None
        current = current[name]
    return current


def set_key(text: str, dotted: str, value: Any) -> str:
    """``text`` with ``dotted`` (``llm.model``) set to ``value``."""
    *tables, key = dotted.split(".")
    if get_key(text, dotted) is None and tables:
        placed = _insert_line(text, ".".join(tables), key, value)
        if placed is not None and _holds(placed, dotted, value):
            return placed
    return _with_tomlkit(text, tables, key, value)


def _insert_line(text: str, table: str, key: str, value: Any) -> str | None:
    lines = text.splitlines(keepends=True)
    line = f"{key} = {tomlkit.item(value).as_string()}\n"
    start = next((i for i, text_line in enumerate(lines) if _header_name(text_line) == table), None)
    if start is None:
        if get_key(text, table) is not None:
            return None  # an inline or dotted table: let tomlkit do it
        end = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return f"{text}{end}[{table}]\n{line}"
    position = start + 1
    last_key = start
    for index in range(start + 1, len(lines)):
        if lines[index].lstrip().startswith("["):
            break
        if _KEY_LINE.match(lines[index]):
            last_key = index
    position = last_key + 1
    while (
        position < len(lines)
        and lines[position].strip()
        and not lines[position].lstrip().startswith("[")
    ):
        position += 1  # the comment lines right below: the table's own
    if position > 0 and not lines[position - 1].endswith("\n"):
        lines[position - 1] += "\n"
    lines.insert(position, line)
    return "".join(lines)


def _header_name(line: str) -> str | None:
    match = _HEADER.match(line)
    if match is None:
        return None
    return ".".join(part.strip().strip("\"'") for part in match.group(1).split("."))


def _holds(text: str, dotted: str, value: Any) -> bool:
    try:
        return bool(get_key(text, dotted) == value)
    except ParseError:
        return False


def _with_tomlkit(text: str, tables: list[str], key: str, value: Any) -> str:
    document = tomlkit.parse(text)
    container: TOMLDocument | Table = document
    for name in tables:
        existing = container.get(name)
        if existing is None:
            table = tomlkit.table()
            container.add(name, table)
            container = table
        elif isinstance(existing, Table):
            container = existing
        elif isinstance(existing, AoT):
            raise ValueError(f"{name} is a list of tables ([[{name}]]); edit it in the file")
        elif isinstance(existing, dict):
            table = tomlkit.table()
            table.update(existing)
            container[name] = table
            container = table
        else:
            raise ValueError(f"{name} is a value, not a table")
    container[key] = value
    return tomlkit.dumps(document)


def delete_key(text: str, dotted: str) -> str:
    """``text`` without ``dotted``; unchanged when it is not there."""
    if get_key(text, dotted) is None:
        return text
    document = tomlkit.parse(text)
    *tables, key = dotted.split(".")
    container: Any = document
    for name in tables:
        container = container[name]
    del container[key]
    return tomlkit.dumps(document)
