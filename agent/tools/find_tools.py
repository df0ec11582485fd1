"""``find_tools``: the prompt stays small however many tools are configured.

Every tool schema is sent with every model call. Rarely used built-in tools
(``Tool.rarely_used``: goals, notes) are always held back, named in ``find_tools``'s
description; past a budget (``[mcp] max_offered_tools`` schemas or ``max_offered_tokens``
tokens of them), tools that come from a source (an MCP server) are held back too, a whole
server at a time. The model gets ``find_tools`` instead:
it searches the held-back tools' names, descriptions and argument names (BM25) and the best
matches are sent with every later call of the turn. Held-back tools the policy allows stay
callable by name; only their schemas wait.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from agent.llm.types import ToolSpec
from agent.tokens import tools_tokens
from agent.tools.base import Tool, ToolContext, ToolResult, schema
from agent.tools.registry import ToolRegistry, model_schema

DESCRIPTION = (
    "More tools exist than shown. Search them by what you need (words of a tool's name or "
    "description); the best matches become callable at once."
)
_WORD = re.compile(r"[a-z0-9]+")


class FindTools(Tool):
    name = "find_tools"
    description = DESCRIPTION
    parameters = schema(
        {
            "query": {"type": "string", "minLength": 1, "maxLength": 300},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        ("query",),
    )
    repeatable = True  # searching again after new information is progress, not a loop

    def __init__(self, *, max_tools: int = 20, max_tokens: int = 1_500) -> None:
        self.max_tools = max_tools
        self.max_tokens = max_tokens

    def split(
        self, specs: Sequence[ToolSpec], registry: ToolRegistry
    ) -> tuple[tuple[ToolSpec, ...], dict[str, ToolSpec]]:
        """The schemas to send and the ones held back (by name) for this turn's tools."""
        kept: list[ToolSpec] = []
        groups: dict[str, list[ToolSpec]] = {}
        deferred: dict[str, ToolSpec] = {}
        rare: list[str] = []
        for spec in specs:
            tool = registry.get(spec.name)
            if spec.name == self.name:
                continue
            if tool is not None and tool.rarely_used:
                deferred[spec.name] = spec
                rare.append(spec.name)
            elif tool is None or not tool.source:
                kept.append(spec)
            else:
                groups.setdefault(tool.source, []).append(spec)
        count = tokens = 0
        held: list[str] = []
        for source, group in groups.items():
            cost = tools_tokens(group)
            if count + len(group) <= self.max_tools and tokens + cost <= self.max_tokens:
                kept.extend(group)
                count, tokens = count + len(group), tokens + cost
            else:
                deferred.update((spec.name, spec) for spec in group)
                held.append(source)
        notes = []
        if rare:
            notes.append(f" Among them: {', '.join(rare)}.")
        if held:
            notes.append(f" Services with tools to find: {', '.join(held)}.")
        if notes:
            spec = ToolSpec(self.name, DESCRIPTION + "".join(notes), model_schema(self.parameters))
            kept.append(spec)
        return tuple(kept), deferred

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        catalog = ctx.state.deferred
        if not catalog:
            return ToolResult("Every tool is already shown; there is nothing more to find.")
        limit = int(args.get("limit") or 5)
        ranked = rank(str(args["query"]), list(catalog.values()))[:limit]
        if not ranked:
            return ToolResult(
                f"No tool matches {args['query']!r}. Try other words; "
                f"{len(catalog)} tools can be searched."
            )
        ctx.state.found.extend(spec.name for spec in ranked)
        lines = [f"- {spec.name}: {_first_line(spec.description)}" for spec in ranked]
        return ToolResult("These tools can be called now:\n" + "\n".join(lines))


def rank(query: str, specs: Sequence[ToolSpec]) -> list[ToolSpec]:
    """``specs`` that share words with ``query``, best first (Okapi BM25, k1=1.2, b=0.75)."""
    terms = set(_words(query))
    documents = [_words(_text(spec)) for spec in specs]
    if not terms or not documents:
        return []
    average = sum(len(d) for d in documents) / len(documents) or 1.0
    frequency = Counter(word for d in documents for word in set(d))
    scored = []
    for spec, document in zip(specs, documents, strict=True):
        counts = Counter(document)
        score = 0.0
        for term in terms & counts.keys():
            idf = math.log(1 + (len(documents) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = counts[term]
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(document) / average))
        if score > 0:
            scored.append((score, spec))
    scored.sort(key=lambda pair: -pair[0])
    return [spec for _, spec in scored]


def _text(spec: ToolSpec) -> str:
    arguments = " ".join(spec.parameters.get("properties", {}))
    # The name counts twice: it is the best summary of what a tool does.
    return f"{spec.name} {spec.name} {spec.description} {arguments}"


def _words(text: str) -> list[str]:
    # camelCase and snake_case names split into words: "addEvent", "add_event" -> add, event
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower()
    return [_stem(word) for word in _WORD.findall(spaced) if word not in _STOP]


_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "that",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "with",
        "you",
        "your",
    ]
)


def _stem(word: str) -> str:
    """Plurals match singulars ("events" finds add_event)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:200]
