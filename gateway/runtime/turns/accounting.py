"""Model usage as the store records it: one row per purpose and model for a turn, one row
per call for work outside a turn (see agent.llm.metered)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from agent.llm.metered import Charge, UsageEntry, UsageRecorder
from agent.llm.types import Usage
from gateway.core.addressing import SEPARATOR, agent_of
from gateway.core.usage import Purpose
from gateway.store import Store, UsageRecord


def channel_of(session_key: str) -> str:
    """The platform a (possibly agent-qualified) session key belongs to."""
    return session_key.rpartition(SEPARATOR)[2].split(":", 1)[0]


def usage_record(
    session_key: str,
    model: str,
    usage: Usage,
    purpose: Purpose,
    principal: str | None,
    *,
    part: str = "",
) -> UsageRecord:
    return UsageRecord(
        channel=channel_of(session_key),
        model=model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        estimated_tokens=usage.estimated_tokens,
        principal=principal,
        purpose=purpose,
        cost_usd=usage.cost_usd,
        agent=agent_of(session_key),
        part=part,
    )


def turn_usage(
    session_key: str, principal: str | None, entries: Sequence[UsageEntry]
) -> list[UsageRecord]:
    """The rows a turn's commit writes (nothing for a turn that made no model call)."""
    return [
        usage_record(session_key, e.model, e.usage, e.purpose, principal, part=e.part)
        for e in entries
        if e.usage.input_tokens or e.usage.output_tokens or e.usage.cost_usd  # a picture: cost only
    ]


def recorder(store: Store) -> UsageRecorder:
    """The UsageRecorder of a MeteredModel: a call outside any turn, stored right away."""

    async def record(charge: Charge, purpose: Purpose, model: str, usage: Usage) -> None:
        row = usage_record(charge.session_key, model, usage, purpose, charge.principal)
        if charge.meter is None or charge.turn_id is None:
            await store.usage.record_call(charge.turn_id, charge.session_key, row)
        else:  # the running turn's row, which its commit replaces with the final count
            part = replace(row, part=charge.meter.part)
            await store.usage.record(charge.turn_id, charge.session_key, part)

    return record
