"""Finding what was said before: by words and by meaning, fused, with recency.

A search looks at two corpora within the caller's scope: the memory files' entries (their
lines) and the past conversations' messages. Each is ranked twice, by words (SQLite FTS5 or
PostgreSQL full text for conversations, shared words for file lines) and by meaning (cosine
similarity of embeddings, :mod:`agent.recall.embedders`). The four rankings are fused by
reciprocal rank fusion (each candidate scores ``1 / (60 + rank)`` in every list it is in),
and a candidate's score is then weighed by its age: a message of today counts fully, one of
a month ago 90%, a year-old one 80% (``RECENCY``). Without embeddings (``memory.embeddings
= "off"``, or the model failing) the same fusion runs on the rankings by words alone. An
answer of a turn that searched (``SEARCH_TOOL``) may only repeat what that search found: it
ranks after every other hit, so the original comes first.

Whose conversations a search sees is decided here from the platform identity, never by the
model (:func:`visible_sessions`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent.memory import RecallScope, recall_scope
from agent.recall.embedders import Embedder, EmbeddingError
from agent.recall.vectors import VectorIndex
from gateway.core.messages import ChatRef
from gateway.core.principal import Principal
from gateway.store import Recall, Said
from gateway.store.engine.sql import significant_words

if TYPE_CHECKING:
    from agent.recall.embedders import Vectors

log = logging.getLogger(__name__)

RRF_K = 60
CANDIDATES = 30  # from each ranking
RECENCY = 0.2  # the share of a score that fades with age...
HALF_LIFE_DAYS = 30.0  # ...by half every month
LINE_VECTORS = 4_096  # memory file lines whose vectors are held
SHOWN_CHARS = 500  # of a message found by meaning (one found by words shows its matches)
SEARCH_TOOL = "memory_search"  # the tool that searches (agent/tools/memory.py)

Clock = Callable[[], float]
Key = int | tuple[str, str]  # a message's id, or a memory entry: (file, line)


@dataclass(frozen=True, slots=True)
class Found:
    """One hit: a message of a past conversation, or an entry (a line) of a memory file."""

    kind: Literal["conversation", "file"]
    score: float
    text: str  # the message (or its matching words in [brackets]), or the file's line
    said: Said | None = None  # a conversation's message
    path: str | None = None  # a file's, relative to the workspace


@dataclass(frozen=True, slots=True)
class Searched:
    found: list[Found]
    by_meaning: bool  # False: by words only (no embeddings, or the model failed)
    why_words_only: str = ""


async def visible_sessions(
    recall: Recall,
    *,
    agent: str,
    principal: Principal,
    chat: ChatRef,
    session_key: str,
    everywhere: bool = False,
) -> dict[str, str | None]:
    """The sessions a search from this chat may see, with their scopes: a group's own (all
    its threads); a person's own direct chats and the groups they spoke in; with
    ``everywhere`` (the owner, in their own direct chat, asking explicitly) every
    conversation of the agent. Always the current chat's."""
    own = recall_scope(agent, principal, chat)
    prefix = RecallScope.prefix(agent)
    if own.group:
        return await recall.sessions([own.key], also=session_key)
    groups = await recall.member_scopes(principal.person, prefix)
    return await recall.sessions(
        [own.key, *groups], prefix=prefix if everywhere else None, also=session_key
    )


def _words(text: str) -> set[str]:
    """The words of ``text`` a search by words counts (as the conversations' search does)."""
    return {w.lower() for w in significant_words(text)}


class Recaller:
    def __init__(
        self,
        recall: Recall,
        embedder: Embedder | None,
        *,
        clock: Clock = time.time,
    ) -> None:
        self.recall = recall
        self.embedder = embedder
        self._clock = clock
        self._vectors: VectorIndex | None = None
        self._lines: OrderedDict[str, Vectors] = OrderedDict()

    async def aclose(self) -> None:
        if self.embedder is not None:
            await self.embedder.aclose()

    @property
    def vectors(self) -> VectorIndex | None:
        """The vectors of the messages, held in memory (``None`` without embeddings)."""
        if self._vectors is None and self.embedder is not None:
            self._vectors = VectorIndex(self.recall, self.embedder.name)
        return self._vectors

    async def search(
        self,
        query: str,
        *,
        sessions: Collection[str],
        entries: Sequence[tuple[str, str]] = (),
        limit: int = 8,
    ) -> Searched:
        """The best ``limit`` hits for ``query`` among the messages of ``sessions`` and the
        memory file ``entries`` ((path, line) each)."""
        keyword, (meaning, why) = await asyncio.gather(  # their store reads: one batch
            self.recall.keyword(list(sessions), query, limit=CANDIDATES),
            self._meaning(query, sessions, entries),
        )
        snippets = {hit.message_id: hit.snippet for hit in keyword}
        rankings: list[list[Key]] = [
            [hit.message_id for hit in keyword],
            list(_by_words(query, entries)[:CANDIDATES]),
            *meaning,
        ]
        scores: dict[Key, float] = {}
        for ranking in rankings:
            for rank, key in enumerate(ranking, start=1):
                scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
        said = await self.recall.messages([key for key in scores if isinstance(key, int)])
        found: list[Found] = []
        now = self._clock()
        for key, score in scores.items():
            if isinstance(key, int):
                message = said.get(key)
                if message is None:
                    continue
                text = snippets.get(key) or _head(message.text)
                age_days = max(0.0, now - message.at) / 86_400
                weight = 1 - RECENCY + RECENCY * 0.5 ** (age_days / HALF_LIFE_DAYS)
                found.append(Found("conversation", score * weight, text, said=message))
            else:
                path, line = key
                found.append(Found("file", score, line, path=path))
        found.sort(key=lambda f: (_repeats_a_search(f), -f.score))
        return Searched(found[:limit], not why, why)

    async def _meaning(
        self, query: str, sessions: Collection[str], entries: Sequence[tuple[str, str]]
    ) -> tuple[list[list[Key]], str]:
        """The rankings by meaning, or none and why."""
        if self.embedder is None:
            return [], "memory.embeddings is off"
        try:
            return await self._by_meaning(query, sessions, entries), ""
        except EmbeddingError as exc:
            log.warning("memory_search by words only: %s", exc)
            return [], str(exc)

    async def _by_meaning(
        self, query: str, sessions: Collection[str], entries: Sequence[tuple[str, str]]
    ) -> list[list[Key]]:
        assert self.embedder is not None
        index = self.vectors
        assert index is not None
        await index.refresh()
        question = (await self.embedder.embed_query(query)).reshape(-1)
        lines = list(dict.fromkeys(line for _, line in entries))
        fresh = [line for line in lines if line not in self._lines]
        if fresh:  # a memory file's new lines (most searches: none)
            for line, vector in zip(fresh, await self.embedder.embed(fresh), strict=True):
                self._lines[line] = vector
            while len(self._lines) > LINE_VECTORS:
                self._lines.popitem(last=False)
        # off the event loop: scoring 100,000 vectors takes milliseconds (numpy lets go of
        # the GIL meanwhile)
        near = await asyncio.to_thread(index.nearest, question, sessions, CANDIDATES)
        messages: list[Key] = [n.message_id for n in near]
        scored = sorted(
            (
                (float(self._lines[entry[1]] @ question), entry)
                for entry in entries
                if entry[1] in self._lines
            ),
            key=lambda pair: pair[0],
            reverse=True,
        )
        files: list[Key] = [entry for _, entry in scored[:CANDIDATES]]
        return [messages, files]


def _repeats_a_search(hit: Found) -> bool:
    """Whether a hit is an answer of a turn that searched: it may only repeat the hits."""
    return hit.said is not None and SEARCH_TOOL in hit.said.calls


def _head(text: str) -> str:
    """A message as a hit shows it: its start."""
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS].rstrip() + " …"


def _by_words(query: str, entries: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Entries sharing words with ``query``, those sharing most first."""
    wanted = _words(query)
    if not wanted:
        return []
    counted = [(len(wanted & _words(entry[1])), entry) for entry in entries]
    return [entry for count, entry in sorted(counted, key=lambda c: -c[0]) if count]
