"""Token accounting with tiktoken, fully offline.

tiktoken downloads its BPE files on first use; servers like ours often cannot. The one we
count with (cl100k_base, 0.8 MB compressed) ships in ``agent/data``; we copy it into a cache
directory once and let tiktoken load it from there, which checks its published hash.

The encoder costs tens of MiB, so it is loaded lazily, on a worker thread, only when an
exact count is needed; cheap character-based estimates serve the hot path.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from agent.llm.types import ChatMessage, ToolSpec

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
MESSAGE_OVERHEAD = 4  # role and separators per message, as OpenAI counts them


class TokenizerUnavailable(RuntimeError):
    """The BPE file could not be found or loaded offline."""


DATA = Path(__file__).parent / "data"


def _bpe_source(name: str) -> Path:
    path = DATA / f"{name}.tiktoken.gz"
    if not path.exists():
        raise TokenizerUnavailable(f"{path} is missing (only cl100k_base ships with Switchboard)")
    return path


def load_encoding(name: str = "cl100k_base", cache_dir: Path | None = None) -> Any:
    """A ``tiktoken.Encoding`` built from the shipped BPE file, never from the network."""
    import tiktoken  # noqa: PLC0415 - only when exact counts are wanted

    cache = cache_dir or Path(tempfile.gettempdir()) / "switchboard-tiktoken"
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest()  # noqa: S324 - tiktoken's cache key
    if not target.exists():
        data = gzip.decompress(_bpe_source(name).read_bytes())
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:
        raise TokenizerUnavailable(f"could not load {name}: {exc}") from exc
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous


# What one picture costs a prompt, about: OpenAI counts 765 for most (85 a picture and 170
# each 512-pixel tile at "auto" detail), Anthropic width x height / 750 (up to about 1,600
# for the 1,568-pixel pictures it takes whole). An estimate on the high side: a prompt with
# pictures (a scan's pages, screenshots) must still fit the window it is fitted to.
IMAGE_TOKENS = 1_200


def estimate(text: str) -> int:
    """A fast estimate: ~4 characters per token for Latin text, ~1 token per character for
    scripts that need several UTF-8 bytes (the extra bytes count double). C-speed only."""
    if not text:
        return 0
    chars = len(text)
    extra_bytes = len(text.encode("utf-8", "surrogatepass")) - chars
    return chars // 4 + extra_bytes // 2 + 1


def message_tokens(msg: ChatMessage, count: Callable[[str], int] = estimate) -> int:
    """Tokens of one message (estimated unless an exact ``count`` is given)."""
    total = MESSAGE_OVERHEAD + count(msg.content)
    for call in msg.tool_calls:
        total += count(call.name) + count(call.arguments) + 3
    return total + IMAGE_TOKENS * len(msg.images)


def tools_tokens(specs: Iterable[ToolSpec], count: Callable[[str], int] = estimate) -> int:
    """Tokens of the tool schemas (estimated unless an exact ``count`` is given)."""
    return sum(
        count(s.name) + count(s.description) + count(json.dumps(s.parameters)) + 8 for s in specs
    )


class TokenCounter:
    """Counts tokens exactly once the encoder is loaded, and estimates until then."""

    def __init__(self, encoding: str = "cl100k_base", *, cache_dir: Path | None = None) -> None:
        self._name = encoding
        self._cache_dir = cache_dir
        self._encoder: Any = None
        self._lock = threading.Lock()
        self.failed = False

    @property
    def exact(self) -> bool:
        return self._encoder is not None

    def load(self) -> bool:
        """Load the encoder (blocking; call from a worker thread). ``False`` if unavailable."""
        with self._lock:
            if self._encoder is None and not self.failed:
                try:
                    self._encoder = load_encoding(self._name, self._cache_dir)
                except TokenizerUnavailable:
                    self.failed = True
        return self._encoder is not None

    def count(self, text: str) -> int:
        if self._encoder is None:
            return estimate(text)
        return len(self._encoder.encode(text, disallowed_special=()))

    def message(self, msg: ChatMessage) -> int:
        return message_tokens(msg, self.count)

    def messages(self, messages: Iterable[ChatMessage]) -> int:
        return sum(self.message(m) for m in messages)

    def tools(self, specs: Iterable[ToolSpec]) -> int:
        return tools_tokens(specs, self.count)
