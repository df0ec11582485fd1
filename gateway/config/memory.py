"""``[memory]``: finding past conversations again, and what a summary keeps.

``memory_search`` finds what was said by words and by meaning (docs/tools.md, "Memory"). By
meaning needs embeddings: ``builtin`` (the default) is a small static model whose weights
ship in the ``wordllama`` package, so it works offline with no server; ``endpoint`` uses an
OpenAI-compatible ``/v1/embeddings`` (Ollama, vLLM, llama.cpp, OpenAI); ``off`` searches by
words only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

Embeddings = Literal["builtin", "endpoint", "off"]


class MemorySettings(BaseModel):
    """Recall of past conversations and the memory kept through a summary."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    embeddings: Embeddings = "builtin"  # builtin | endpoint | off (by words only)
    embeddings_url: str | None = None  # endpoint: the server's /v1 root
    embeddings_model: str | None = None  # endpoint: its model (nomic-embed-text, ...)
    embeddings_api_key: SecretStr | None = None  # endpoint: unset when it needs none
    # A summary keeps the person's own messages verbatim beside it (the newest first).
    quote_share: float = Field(default=0.1, ge=0, le=0.3)  # of the window; 0: the summary alone

    @model_validator(mode="after")
    def _endpoint_named(self) -> MemorySettings:
        if self.embeddings == "endpoint" and not (self.embeddings_url and self.embeddings_model):
            raise ValueError(
                'memory.embeddings = "endpoint" needs memory.embeddings_url (the /v1 root) '
                "and memory.embeddings_model"
            )
        return self
