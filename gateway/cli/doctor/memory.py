"""Doctor's check of recall (``[memory]``): whether ``memory_search`` finds past
conversations by meaning as well as by words, with which model, or why by words only."""

from __future__ import annotations

import asyncio

from gateway.cli.doctor.checks import Check
from gateway.config.settings import Settings

TIMEOUT = 10.0


async def memory_checks(settings: Settings) -> list[Check]:
    from agent.recall.embedders import EmbeddingError  # noqa: PLC0415 - when doctor runs
    from gateway.runtime.agents.recall import embedder_for  # noqa: PLC0415

    memory = settings.memory
    embedder = embedder_for(memory)
    if embedder is None:
        return [Check("memory", "ok", 'memory_search by words only (memory.embeddings = "off")')]
    try:
        async with asyncio.timeout(TIMEOUT):
            await embedder.embed_query("where did I leave my bike")
    except (EmbeddingError, OSError, TimeoutError) as exc:
        why = str(exc) or type(exc).__name__
        if memory.embeddings == "builtin":
            fix = "reinstall Switchboard (the wordllama package carries the model)"
        else:
            fix = "check memory.embeddings_url and memory.embeddings_model"
        return [
            Check("memory", "warn", f"memory_search by words only: {why}; {fix}"),
        ]
    finally:
        await embedder.aclose()
    where = (
        "the built-in model (WordLlama, shipped in its package: offline, no server)"
        if memory.embeddings == "builtin"
        else f"{memory.embeddings_model} at {memory.embeddings_url}"
    )
    return [Check("memory", "ok", f"memory_search by words and by meaning: {where}")]
