"""Property tests (hypothesis) of every pure converter and parser the hostile input reaches
(threat model rows 19, 20 and 22): no crash on any input, platform limits held, code fences
balanced in every chunk, no text lost, tool-call arguments always an object or an error."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.guards.parser import decode_arguments, parse_response
from agent.llm.types import LLMResponse, ToolCall
from channels._text import split_message, utf16_length
from channels.discord.render import MAX_MESSAGE as DISCORD_MAX
from channels.discord.render import render as discord_render
from channels.email.parse import parse_mail
from channels.slack.render import render as slack_render
from channels.telegram.render import convert as telegram_convert
from channels.telegram.render import render as telegram_render
from channels.webchat.render import render_markdown
from gateway.core.schedule_spec import ScheduleError, parse_schedule

# Markdown specials, a fence, RTL override, zero-width joiner/space, a 4-byte emoji, a
# combining mark, CJK: what breaks formatters and length counts.
HOSTILE = [*"ab *_~`[]()#>-|\\\n", "```", "```python\n", "\u202e", "\u200b", "\u200d"]
HOSTILE += ["😀", "👩‍💻", "e\u0301", "字", "\t", "<", "&"]
hostile_text = st.lists(st.sampled_from(HOSTILE), max_size=400).map("".join)
# 150 examples in CI (derandomized, tests/conftest.py); `make fuzz` overrides the count.
FAST = settings(max_examples=max(150, settings.default.max_examples))


def letters(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())


@FAST
@given(hostile_text, st.integers(min_value=30, max_value=400))
def test_split_loses_nothing_and_balances_fences(text: str, limit: int) -> None:
    chunks = split_message(text, limit, length=utf16_length)
    assert all(utf16_length(chunk) <= limit for chunk in chunks)
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0 or text.count("```") % 2 == 1, chunk
        chunk.encode("utf-8")  # no half of a surrogate pair: a 4-byte emoji is never cut
    # the fences reopened at chunk edges add only a language tag: the letters are all there
    rejoined = letters("".join(chunks))
    assert rejoined.replace("python", "") == letters(text).replace("python", "")


@FAST
@given(hostile_text, st.integers(min_value=60, max_value=600))
def test_telegram_parts_fit_and_entities_stay_inside(text: str, limit: int) -> None:
    for part in telegram_render(text, limit=limit):
        size = utf16_length(part.text)
        assert size <= limit and utf16_length(part.plain) <= max(limit, size) + 16
        part.text.encode("utf-8")
        for entity in part.entities:
            assert entity.offset >= 0 and entity.offset + entity.length <= size


def shown(text: str) -> str:
    """The characters a reader sees, apart from spaces and what a layout adds (bullets,
    table rules and bars, a rule's dashes, which the web chat draws instead of writing)."""
    return "".join(c for c in text if not c.isspace() and c not in "•—|-+")


@FAST
@given(hostile_text)
def test_telegram_shows_the_characters_the_web_chat_shows(text: str) -> None:
    page = html.unescape(re.sub(r"<[^>]+>", "", render_markdown(text)))
    telegram, _ = telegram_convert(text)
    assert shown(telegram) == shown(page)


@settings(max_examples=max(20, settings.default.max_examples // 100))
@given(st.sampled_from(["*", "_", "`", "```", "[", "**", "\u202e", "😀"]))
def test_an_unclosed_marker_at_the_4096_edge_still_renders_in_limits(marker: str) -> None:
    text = "x" * 4090 + marker + " tail " + "y" * 3000
    parts = telegram_render(text)
    assert all(utf16_length(p.text) <= 4096 for p in parts)
    assert "tail" in "".join(p.text for p in parts)
    assert letters("".join(p.text for p in parts)).count("y") == 3000


@FAST
@given(hostile_text)
def test_slack_parts_are_never_empty_and_keep_the_words(text: str) -> None:
    parts = slack_render(text, limit=120)
    assert all(part.strip() for part in parts)
    assert all(len(part) <= 40_000 for part in parts)  # Slack's own ceiling per message
    if not text.strip():
        assert parts == []


@FAST
@given(hostile_text.map(lambda t: t * 8))
def test_discord_parts_fit_2000_and_balance_fences(text: str) -> None:
    parts = discord_render(text)
    for part in parts:
        assert part.content is not None and 0 < len(part.content) <= DISCORD_MAX
        if text.count("```") % 2 == 0:
            assert part.content.count("```") % 2 == 0


@FAST
@given(st.binary(max_size=3000))
def test_any_bytes_as_an_email_parse_without_crashing(raw: bytes) -> None:
    parsed = parse_mail(raw, zone=UTC)
    assert isinstance(parsed.text, str)


@FAST
@given(
    st.binary(max_size=500),
    st.sampled_from(["utf-8", "latin-1", "no-such-charset", "utf-16"]),
    st.sampled_from(["8bit", "base64", "quoted-printable"]),
)
def test_invalid_bytes_in_a_declared_charset_still_give_text(
    body: bytes, charset: str, encoding: str
) -> None:
    import base64
    import quopri

    payload = {
        "8bit": body,
        "base64": base64.encodebytes(body),
        "quoted-printable": quopri.encodestring(body),
    }[encoding]
    raw = (
        b"From: Dana <dana@example.com>\r\nTo: bot@example.com\r\nSubject: hi\r\n"
        b"Message-ID: <1@example.com>\r\nMIME-Version: 1.0\r\n"
        + f"Content-Type: text/plain; charset={charset}\r\n".encode()
        + f"Content-Transfer-Encoding: {encoding}\r\n\r\n".encode()
        + payload
    )
    parsed = parse_mail(raw, zone=UTC)
    assert parsed.sender == "dana@example.com"
    assert isinstance(parsed.text, str)
    parsed.text.encode("utf-8")  # no lone surrogates reach the model or the store


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
raw_arguments = st.one_of(
    st.text(max_size=80),
    json_values.map(json.dumps),
    json_values.map(lambda v: json.dumps(json.dumps(v))),
)


@FAST
@given(raw_arguments)
def test_tool_arguments_are_an_object_or_an_error(raw: str) -> None:
    args, error, _ = decode_arguments(raw)
    assert (args is None) != (error is None)
    assert args is None or isinstance(args, dict)


@FAST
@given(
    st.text(max_size=300),
    st.lists(
        st.tuples(st.sampled_from(["read_file", "nope", "read_fileread_file", ""]), raw_arguments),
        max_size=3,
    ),
)
def test_parsed_calls_always_carry_json_object_arguments(
    text: str, calls: list[tuple[str, str]]
) -> None:
    response = LLMResponse(text, tuple(ToolCall(f"c{i}", n, a) for i, (n, a) in enumerate(calls)))
    parsed = parse_response(response, {"read_file", "web_search"}, call_prefix="t")
    for call in parsed.calls:
        assert isinstance(json.loads(call.call.arguments), dict)


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
schedule_words = st.lists(
    st.sampled_from(
        [
            "in",
            "every",
            "at",
            "tomorrow",
            "today",
            "weekday",
            "monday",
            "2",
            "0",
            "99",
            "9:00",
            "25:61",
            "pm",
            "am",
            "minutes",
            "hours",
            "s",
            "*",
            "*/0",
            "1-5",
            "-1",
            "2026-12-01",
            "09:00",
            "\u202e",
            "😀",
            "",
        ]
    ),
    max_size=6,
).map(" ".join)


@FAST
@given(schedule_words | st.text(max_size=40))
def test_schedules_parse_or_say_what_is_accepted(text: str) -> None:
    try:
        spec = parse_schedule(text, now=NOW, timezone="Europe/Berlin")
    except ScheduleError as exc:
        assert str(exc)
        return
    if spec.kind == "once":
        assert spec.at is not None and spec.at > NOW
    if spec.kind == "interval":
        assert spec.every_seconds is not None and spec.every_seconds > 0
