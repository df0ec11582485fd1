"""Reading an HTTP body whole, up to a size, and its JSON.

``aiohttp``'s ``StreamReader.read(n)`` returns what has arrived so far, up to ``n`` bytes:
over a real network (or a proxy, or a body larger than one read) that is often only the
start of the body. Every body the gateway reads to the end, a request's or a response's,
goes through :func:`read_capped`, which reads until the end and stops as soon as the body
is over its size.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import StreamReader

CHUNK = 65_536


async def read_capped(stream: StreamReader, limit: int) -> bytes | None:
    """The whole body, or ``None`` as soon as it is over ``limit`` bytes (read no further)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream.iter_chunked(CHUNK):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class MalformedJson(ValueError):
    """A body the JSON parser cannot read whole: one nested deeper than it recurses."""


def parse_json(data: str | bytes) -> Any:
    """``json.loads``, with a document nested too deep (``[`` a hundred thousand times, a
    few hundred kilobytes anyone may send) refused as a :class:`ValueError` like any other
    malformed body: the parser raises ``RecursionError``, which every handler let through
    as a 500 with a traceback logged."""
    try:
        return json.loads(data)
    except RecursionError:
        raise MalformedJson("the JSON is nested too deeply") from None
