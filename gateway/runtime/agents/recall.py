"""Recall of past conversations, built from ``[memory]``: the embedding model, the search
every agent's ``memory_search`` uses, and the indexer that makes the vectors.

One of each per gateway: the vectors are shared by the agents (a search sees only its own
agent's sessions) and, through the database, by a cluster's nodes; the indexer runs where
the scheduler does (one process, or the cluster's leader).
"""

from __future__ import annotations

from agent.recall.embedders import BuiltinEmbedder, Embedder, EndpointEmbedder
from agent.recall.indexer import RecallIndexer
from agent.recall.search import Recaller
from gateway.config.memory import MemorySettings
from gateway.store import Store


def embedder_for(memory: MemorySettings) -> Embedder | None:
    """The embedding model of ``memory.embeddings`` (``None``: off). Nothing is loaded yet."""
    if memory.embeddings == "off":
        return None
    if memory.embeddings == "endpoint":
        assert memory.embeddings_url and memory.embeddings_model  # the settings checked
        key = memory.embeddings_api_key
        return EndpointEmbedder(
            base_url=memory.embeddings_url,
            model=memory.embeddings_model,
            api_key=key.get_secret_value() if key else None,
        )
    return BuiltinEmbedder()


def build_recall(memory: MemorySettings, store: Store) -> tuple[Recaller, RecallIndexer]:
    embedder = embedder_for(memory)
    return Recaller(store.recall, embedder), RecallIndexer(store.recall, embedder)
