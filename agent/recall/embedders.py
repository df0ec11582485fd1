"""Text to vectors, for finding past conversations by meaning.

Two kinds (``memory.embeddings``):

- ``builtin``: WordLlama's static embeddings (the ``l2_supercat`` token vectors, 256
  dimensions), whose weights and tokenizer ship inside the ``wordllama`` package on PyPI: no
  download at run time, no server, about 0.1 ms of CPU per message. Only its two data files
  are read (with ``tokenizers`` and ``safetensors``), never its code: importing it
  configures the process's logging and can fetch other models from a hub.
- ``endpoint``: an OpenAI-compatible ``/v1/embeddings`` (Ollama, vLLM, llama.cpp, OpenAI),
  through the official SDK.

Every vector is float32 and of unit length, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]
else:
    Vectors = Any

BUILTIN_MODEL = "l2_supercat"
BUILTIN_FILES = (
    "weights/l2_supercat_256.safetensors",
    "tokenizers/l2_supercat_tokenizer_config.json",
)
MAX_TOKENS = 512  # of one text: a pasted document is known by its start


class EmbeddingError(Exception):
    """The embedding model could not be loaded or did not answer."""


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """Names the model and its settings: vectors of another name are made again."""

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit vector per text (a row each), off the event loop: the indexer's."""

    async def embed_query(self, text: str) -> Vectors:
        """The vector of a search's words, as a row (the search waits for it)."""

    async def aclose(self) -> None:
        """Let go of connections (an endpoint's)."""


def builtin_files() -> tuple[Path, Path] | None:
    """Where the built-in model's weights and tokenizer are (``None``: the ``wordllama``
    package is not installed). Found without importing the package."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = (root / name for name in BUILTIN_FILES)
    if not weights.is_file() or not tokenizer.is_file():
        return None
    return weights, tokenizer


# The built-in model's token vectors and tokenizer, by dimensions: read once per process
# and shared by every gateway in it (read-only). Loaded again per gateway, a restart inside
# one process (a test, the soak) kept 30-50 MB more each time: native memory the allocator
# does not hand back.
_LOADED: dict[int, tuple[Any, Any]] = {}
_LOADING = threading.Lock()


def _load_builtin(dims: int) -> tuple[Any, Any]:
    """(the token vectors as float32, the tokenizer) of the built-in model; once per process."""
    with _LOADING:
        loaded = _LOADED.get(dims)
        if loaded is not None:
            return loaded
        files = builtin_files()
        if files is None:
            raise EmbeddingError(
                "the built-in embedding model is missing: install the wordllama package "
                "(pip install wordllama), or set memory.embeddings"
            )
        try:
            import numpy as np  # noqa: PLC0415 - only when recall by meaning is on
            from safetensors.numpy import load_file  # noqa: PLC0415
            from tokenizers import Tokenizer  # noqa: PLC0415
        except ImportError as exc:
            raise EmbeddingError(f"the built-in embedding model cannot load: {exc}") from exc

        weights, tokenizer_file = files
        matrix = next(iter(load_file(str(weights)).values()))[:, :dims]
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        loaded = _LOADED[dims] = (np.ascontiguousarray(matrix, dtype=np.float32), tokenizer)
        return loaded


class BuiltinEmbedder:
    """WordLlama's static embeddings: a text's vector is the mean of its tokens' vectors.
    Loaded on a worker thread at first use (about 0.4 s, 16 MB of weights), once per process."""

    def __init__(self, dims: int = 256) -> None:
        self.dims = dims
        self._model: tuple[Any, Any] | None = None  # (the token vectors, the tokenizer)

    @property
    def name(self) -> str:
        return f"wordllama:{BUILTIN_MODEL}:{self.dims}"

    def load(self) -> None:
        """Read the weights and the tokenizer (on a worker thread; once per process)."""
        if self._model is None:
            self._model = _load_builtin(self.dims)

    def embed_now(self, texts: Sequence[str]) -> Vectors:
        """The vectors of ``texts``, on the calling thread (loaded already: :meth:`load`)."""
        import numpy as np  # noqa: PLC0415

        self.load()
        assert self._model is not None
        matrix, tokenizer = self._model
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, encoding in enumerate(
            tokenizer.encode_batch(list(texts), add_special_tokens=False)
        ):
            ids = encoding.ids
            if ids:
                out[row] = matrix[np.clip(ids, 0, len(matrix) - 1)].mean(axis=0)
        return unit(out)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return await asyncio.to_thread(self.embed_now, texts)

    async def embed_query(self, text: str) -> Vectors:
        if self._model is None:
            await asyncio.to_thread(self.load)
        return self.embed_now([text])  # ~50 us: less than a thread's round trip

    async def aclose(self) -> None:
        return None


class EndpointEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint (``memory.embeddings = "endpoint"``)."""

    def __init__(
        self, *, base_url: str, model: str, api_key: str | None, timeout: float = 30.0
    ) -> None:
        import openai  # noqa: PLC0415 - the SDK is loaded by the model's provider anyway

        self._model = model
        self._base_url = base_url
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "no-key",
            base_url=base_url,
            timeout=timeout,
            max_retries=1,
            http_client=openai.DefaultAioHttpClient(timeout=timeout),
        )

    @property
    def name(self) -> str:
        return f"endpoint:{self._model}"

    async def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np  # noqa: PLC0415
        import openai  # noqa: PLC0415

        try:
            answer = await self._client.embeddings.create(
                model=self._model, input=list(texts), encoding_format="float"
            )
        except openai.OpenAIError as exc:
            raise EmbeddingError(
                f"the embeddings endpoint {self._base_url} (memory.embeddings_url) failed: {exc}"
            ) from exc
        rows = sorted(answer.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise EmbeddingError(
                f"the embeddings endpoint {self._base_url} answered {len(rows)} vectors "
                f"for {len(texts)} texts"
            )
        return unit(np.array([row.embedding for row in rows], dtype=np.float32))

    async def embed_query(self, text: str) -> Vectors:
        return await self.embed([text])

    async def aclose(self) -> None:
        await self._client.close()


def unit(vectors: Vectors) -> Vectors:
    """Each row scaled to length 1 (a zero row stays zero)."""
    import numpy as np  # noqa: PLC0415

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return scaled
