"""Splitting long answers at platform limits without losing text or breaking code blocks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from channels._text import split_message, utf16_length


def rejoin(chunks: list[str]) -> str:
    return "".join(c.replace("```python\n", "").replace("\n```", "") for c in chunks)


def test_short_text_is_one_chunk() -> None:
    assert split_message("hello", 100) == ["hello"]
    assert split_message("", 100) == []


def test_splits_at_paragraphs_first() -> None:
    text = "a" * 60 + "\n\n" + "b" * 60
    assert split_message(text, 100) == ["a" * 60, "b" * 60]


def test_code_block_at_the_edge_is_closed_and_reopened() -> None:
    code = "\n".join(f"print({i})" for i in range(40))
    text = "Here is the code:\n```python\n" + code + "\n```\nDone."
    chunks = split_message(text, 120)
    assert len(chunks) > 2
    for chunk in chunks:
        assert len(chunk) <= 120
        assert chunk.count("```") % 2 == 0, chunk  # every chunk's fences are balanced
    assert chunks[1].startswith("```python\n")
    assert chunks[-1].endswith("Done.")
    for i in range(40):
        assert sum(f"print({i})" in c for c in chunks) == 1


def test_telegram_counts_utf16_units() -> None:
    emoji = "😀" * 3000  # 6000 UTF-16 units
    chunks = split_message(emoji, 4096, length=utf16_length)
    assert all(utf16_length(c) <= 4096 for c in chunks)
    assert "".join(chunks) == emoji


@settings(max_examples=max(200, settings.default.max_examples))
@given(
    st.text(alphabet=st.sampled_from(list("ab c\n😀é")), min_size=1, max_size=600),
    st.integers(min_value=20, max_value=200),
)
def test_no_text_is_lost_and_limits_hold(text: str, limit: int) -> None:
    chunks = split_message(text, limit, length=utf16_length)
    assert all(utf16_length(c) <= limit for c in chunks)
    squeeze = "".join(text.split())
    assert "".join("".join(chunks).split()) == squeeze


def test_a_fence_written_inside_a_line_is_not_cut_open() -> None:
    # Discord and Slack render ```...``` inside a line as code: the cut goes before it
    chunks = split_message("aaaaaaaaaaaaaaaaaa```python\n```", 30, length=utf16_length)
    assert chunks == ["aaaaaaaaaaaaaaaaaa", "```python\n```"]


def test_a_long_line_on_a_fence_is_not_carried_into_every_part() -> None:
    # only the backticks and a language name reopen a block, never a whole line of code
    chunks = split_message("x ```" + "y" * 60, 30, length=utf16_length)
    assert len(chunks) <= 4 and "".join(chunks).count("y") == 60
