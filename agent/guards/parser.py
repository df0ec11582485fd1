"""Parser layer: turn messy model output into tool calls the executor can trust.

Three tiers, tried in order:

1. native tool calls, with their arguments repaired where the intent is unambiguous
   (double-encoded JSON, the same object repeated, a tool name written twice);
2. a JSON object in the text, fenced or bare: ``{"tool": "read_file", "arguments": {...}}``;
3. a lenient key/value action block (AI Legion's format)::

       action: read_file
       path: notes.txt

Whatever is recovered, the assistant message kept for history carries well-formed JSON
arguments, so a malformed call can never poison the next provider request.

A call found in the text must be what the message ends with, as a model that cannot call
tools natively writes one: a fenced block after a line of intent, or a bare object or an
action block that is the whole message. An object or an action block in the middle of
prose is an example the model shows (or quotes from a page, a file, a memory), never a
call: it stays in the answer and runs nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any, Literal

from agent.llm.types import LLMResponse, ToolCall

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_ACTION_LINE = re.compile(
    r"^\s*(?:action|tool)\s*:\s*([A-Za-z_][\w-]*)\s*$", re.IGNORECASE | re.MULTILINE
)
_KEY_VALUE = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*:\s?(.*)$")
_NAME_KEYS = ("tool", "name", "action", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A tool call with its arguments decoded, or the reason they could not be."""

    call: ToolCall  # arguments normalised to valid JSON text (``{}`` when unusable)
    args: dict[str, Any] | None
    error: str | None = None
    repaired: str | None = None  # what was fixed, for the trace


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    text: str
    calls: tuple[ParsedCall, ...]
    tier: Literal["native", "json", "keyvalue", "none"]

    def history_calls(self) -> tuple[ToolCall, ...]:
        return tuple(c.call for c in self.calls)


def parse_response(
    response: LLMResponse, tool_names: Collection[str], *, call_prefix: str
) -> ParsedResponse:
    if response.tool_calls:
        calls = tuple(_parse_native(c, tool_names) for c in response.tool_calls)
        return ParsedResponse(response.text, calls, "native")
    text = response.text
    found = _json_in_text(text, tool_names)
    tier: Literal["json", "keyvalue"] = "json"
    if found is None:
        found = _key_value_in_text(text, tool_names)
        tier = "keyvalue"
    if found is None:
        return ParsedResponse(text, (), "none")
    name, args, span = found
    call = ToolCall(f"{call_prefix}-0", name, json.dumps(args, ensure_ascii=False))
    remaining = (text[: span[0]] + text[span[1] :]).strip()
    return ParsedResponse(
        remaining, (ParsedCall(call, args, repaired=f"parsed from {tier} text"),), tier
    )


def _parse_native(call: ToolCall, tool_names: Collection[str]) -> ParsedCall:
    name, repaired = _repair_name(call.name, tool_names)
    args, error, how = decode_arguments(call.arguments)
    if how:
        repaired = f"{repaired}; {how}" if repaired else how
    normalised = json.dumps(args if args is not None else {}, ensure_ascii=False)
    return ParsedCall(replace(call, name=name, arguments=normalised), args, error, repaired)


def _repair_name(name: str, tool_names: Collection[str]) -> tuple[str, str | None]:
    """``web_searchweb_search`` → ``web_search`` (a name streamed twice)."""
    if name in tool_names or len(name) % 2:
        return name, None
    half = name[: len(name) // 2]
    if half * 2 == name and half in tool_names:
        return half, f"tool name {name!r} repeated"
    return name, None


def decode_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(arguments, error, repair note) for a raw argument string."""
    text = (raw or "").strip() or "{}"
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        first = _first_object(text)
        if first is not None:
            return first, None, "used the first of several JSON objects"
        return (
            None,
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}); send one JSON object",
            None,
        )
    note = None
    if isinstance(value, str):  # double-encoded: "{\"path\": \"a\"}"
        try:
            value = json.loads(value)
            note = "arguments were double-encoded"
        except json.JSONDecodeError:
            return None, "arguments must be a JSON object, not a string", None
    if value is None:
        return {}, None, "null arguments treated as {}"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, not {type(value).__name__}", None
    return value, None, note


def _first_object(text: str) -> dict[str, Any] | None:
    """The first complete JSON object in ``text`` (``{"a":1}{"a":1}`` → ``{"a":1}``)."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _json_in_text(
    text: str, tool_names: Collection[str]
) -> tuple[str, dict[str, Any], tuple[int, int]] | None:
    candidates: list[tuple[str, tuple[int, int]]] = [
        (m.group(1), m.span()) for m in _FENCE.finditer(text)
    ]
    start = text.find("{")
    if start >= 0:
        try:
            _, end = json.JSONDecoder().raw_decode(text[start:])
            candidates.append((text[start : start + end], (start, start + end)))
        except json.JSONDecodeError:
            pass
    for blob, span in candidates:
        fenced = text[span[0] : span[0] + 3] == "```"
        before, after = text[: span[0]].strip(), text[span[1] :].strip()
        if after or (before and not fenced):
            continue  # inside prose: an example, not a call
        try:
            obj = json.loads(blob)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
        if name not in tool_names:
            continue
        args = next((obj[k] for k in _ARG_KEYS if isinstance(obj.get(k), dict)), None)
        if args is None:
            args = {k: v for k, v in obj.items() if k not in _NAME_KEYS and k != "thoughts"}
        return str(name), args, span
    return None


def _key_value_in_text(
    text: str, tool_names: Collection[str]
) -> tuple[str, dict[str, Any], tuple[int, int]] | None:
    match = _ACTION_LINE.search(text)
    if match is None or match.group(1) not in tool_names or text[: match.start()].strip():
        return None  # an action block is the whole message, or prose that quotes one
    args: dict[str, Any] = {}
    key: str | None = None
    end = match.end() + (1 if text[match.end() : match.end() + 1] == "\n" else 0)
    for line in text[end:].splitlines(keepends=True):
        pair = _KEY_VALUE.match(line.rstrip("\n"))
        if pair and pair.group(1) != "thoughts":
            key = pair.group(1)
            value = pair.group(2).strip()
            args[key] = "" if value == "|" else value
        elif pair:
            key = None  # thoughts are not arguments
        elif key is not None and (line.startswith((" ", "\t")) or not line.strip()):
            args[key] = (args[key] + "\n" + line.strip()).strip() if args[key] else line.strip()
        else:
            break
        end += len(line)
    if text[end:].strip():
        return None  # prose follows it: quoted, not called
    return match.group(1), args, (match.start(), end)
