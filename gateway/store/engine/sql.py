"""The seam between the store's repositories and the database engine under them.

Every repository writes its statements once, in the SQL both engines share, with ``?``
placeholders, and runs them on a :class:`Connection`: ``execute`` / ``executemany`` returning
a cursor with ``fetchone``, ``fetchall``, iteration and ``rowcount``. New rows report their
id through ``RETURNING id`` (both engines have it), never ``lastrowid``. The few statements
that differ between SQLite and PostgreSQL are built by the connection's :class:`Dialect`.

Writing a new statement: stick to ``INSERT ... ON CONFLICT``, ``COALESCE``, ``CASE``, plain
joins and aggregates; anything else (a date function, full-text search, ``rowid``) goes
through a :class:`Dialect` method with one spelling per engine, and the store test suite
runs it on both (``tests/test_store*.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Protocol

Statement = tuple[str, Sequence[Any]]  # SQL with ``?`` placeholders, and its values


class Cursor(Protocol):
    """What a statement returns: its rows (tuples) and the count of rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """One open connection, inside the transaction :meth:`Database.run` opened for the job."""

    @property
    def dialect(self) -> Dialect: ...

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor: ...

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> Cursor: ...

    def execute_together(self, statements: Sequence[Statement], /) -> list[Cursor]:
        """Run ``statements`` in order, as one query where the engine can (one round trip
        on PostgreSQL): for a job whose statements need no result of each other. Each
        statement's cursor, in order."""

    def notify(self, topic: str, payload: str = "", /) -> None:
        """Tell the other nodes of a cluster, when this transaction commits (PostgreSQL
        ``NOTIFY``; nothing on SQLite, where one process wakes itself in memory)."""


_WORD = re.compile(r"\w+")
# The commonest English words: any of them matches most messages, so a search for "where
# did I leave my bike" would rank every "where" and "my" above what it is looking for.
COMMON_WORDS = frozenset(
    [
        "a",
        "about",
        "after",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "before",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "done",
        "for",
        "from",
        "get",
        "got",
        "had",
        "has",
        "have",
        "he",
        "her",
        "here",
        "him",
        "his",
        "how",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "me",
        "mine",
        "more",
        "most",
        "my",
        "no",
        "not",
        "of",
        "off",
        "on",
        "or",
        "our",
        "ours",
        "out",
        "over",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "under",
        "up",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "yes",
        "you",
        "your",
        "yours",
    ]
)


def significant_words(text: str) -> list[str]:
    """The words of ``text`` a search by words counts: at least two characters, not among
    the commonest English words."""
    return [w for w in _WORD.findall(text) if len(w) > 1 and w.lower() not in COMMON_WORDS]


def search_words(text: str) -> list[str]:
    """The words of a search that count (:func:`significant_words`): twelve at most."""
    return significant_words(text)[:12]


@dataclass(frozen=True, slots=True)
class Dialect:
    """The statements that are spelled differently per engine."""

    name: Literal["sqlite", "postgresql"]

    @property
    def rowid(self) -> str:
        """A column naming one physical row, for deletes in batches."""
        return "rowid" if self.name == "sqlite" else "ctid"

    @property
    def greatest(self) -> str:
        """The function returning the larger of its arguments."""
        return "MAX" if self.name == "sqlite" else "GREATEST"

    def before_colon(self, expression: str) -> str:
        """The text before the first ``:`` (a tool call key's turn id)."""
        if self.name == "sqlite":
            return f"substr({expression}, 1, instr({expression}, ':') - 1)"
        return f"split_part({expression}, ':', 1)"

    def json_text(self, column: str, key: str) -> str:
        """The text at ``key`` of the JSON object in ``column`` (a constant key: it is part
        of the statement)."""
        if self.name == "sqlite":
            return f"json_extract({column}, '$.{key}')"
        return f"({column}::json ->> '{key}')"

    def search_statement(self, sessions: int) -> str:
        """Full-text search over ``messages_fts`` of ``sessions`` session keys, best first;
        parameters: the query (:meth:`search_query`), the session keys, the limit. Rows: the
        message id, a snippet with each match between ``HIT_START`` and ``HIT_END``."""
        marks = ",".join("?" for _ in range(sessions))
        if self.name == "sqlite":
            return (
                f"SELECT message_id, snippet(messages_fts, 0, '{HIT_START}', '{HIT_END}',"
                " ' ... ', 24)"
                f" FROM messages_fts WHERE messages_fts MATCH ? AND session_key IN ({marks})"
                " ORDER BY rank LIMIT ?"
            )
        return (
            "SELECT f.message_id, ts_headline('simple', f.content, q.query,"
            f' \'StartSel="{HIT_START}", StopSel="{HIT_END}", MaxWords=24, MinWords=8,'
            ' MaxFragments=2, FragmentDelimiter=" ... "\')'
            " FROM (SELECT websearch_to_tsquery('simple', ?) AS query) q, messages_fts f"
            f" WHERE f.tsv @@ q.query AND f.session_key IN ({marks})"
            " ORDER BY ts_rank(f.tsv, q.query) DESC, f.message_id LIMIT ?"
        )

    def search_query(self, text: str) -> str:
        """User words as a query that cannot be a syntax error: any of the words matches."""
        words = search_words(text)
        if self.name == "sqlite":
            return " OR ".join(f'"{w}"' for w in words) or '""'
        return " or ".join(words)


# Around each matching word of a search's snippet: characters of Unicode's private use
# area, which no message's text means as anything, so the words a person wrote in brackets
# are never taken for matches (gateway/store/recall.py:KeywordHit).
HIT_START, HIT_END = "\ue000", "\ue001"

# PostgreSQL NOTIFY topics of a cluster (gateway/store/cluster/listener.py listens to them)
INBOUND_TOPIC = "switchboard_inbound"  # a message was journaled: some node should run it
OUTBOX_TOPIC = "switchboard_outbox"  # payload: the channel with a new reply to send
WAKE_TOPIC = "switchboard_wake"  # payload: the id of a parked turn whose approval was decided
PEOPLE_TOPIC = "switchboard_people"  # payload: a person who set their own time zone
TASKS_TOPIC = "switchboard_tasks"  # payload: "<task id>\n<who>" of a background task stopped


SQLITE = Dialect("sqlite")
POSTGRESQL = Dialect("postgresql")


@lru_cache(maxsize=2048)
def placeholder_pieces(sql: str) -> tuple[str, ...]:
    """``sql`` cut at each ``?`` placeholder outside quoted text: the text around the
    values, one piece more than there are placeholders (PostgreSQL binds them on the
    client: gateway/store/engine/pg_wire.py)."""
    pieces: list[str] = []
    quote: str | None = None
    start = 0
    for index, char in enumerate(sql):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in ("'", '"'):
            quote = char
        elif char == "?":
            pieces.append(sql[start:index])
            start = index + 1
    pieces.append(sql[start:])
    return tuple(pieces)


@lru_cache(maxsize=1024)
def to_numbered_style(sql: str) -> tuple[str, int]:
    """``?`` placeholders as ``$1``, ``$2``… (outside quoted text), as PostgreSQL's
    ``PREPARE`` wants them; and how many there are."""
    first, *rest = placeholder_pieces(sql)
    return first + "".join(f"${n}{piece}" for n, piece in enumerate(rest, 1)), len(rest)
