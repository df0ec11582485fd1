"""Which delivery each webhook body came as: the same body under another delivery id is
not a second delivery (channels/hooks/channel.py).

A delivery id alone does not stop a replay when the id is not signed (GitHub's, the old
``sha256=`` format, a Stripe-style signature with an ``X-Switchboard-Delivery`` added): a
captured body re-sent under a new id would be a new turn. So each hook's bodies are claimed
by digest, for the delivery that brought them first. A body signed with a time is claimed
until its signature expires (after that, replaying it is refused for its time, and the
sender may send the same body again); one signed without a time is claimed for as long as
the journal keeps deliveries (``Retention.journal``): nothing else tells a replay from a
resend.

A claim is written before the delivery is journaled and names its delivery id, so a
delivery that got no answer (a crash, a full disk) is taken again when the sender retries
it under the same id.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.store.engine.db import Database
from gateway.store.engine.retention import delete_batched
from gateway.store.engine.sql import Connection


class WebhookBodies:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    async def claim(self, hook: str, digest: str, delivery: str, *, until: float | None) -> str:
        """The delivery the body ``digest`` of ``hook`` belongs to: ``delivery`` when the
        body is new (or its earlier claim expired), else the one that brought it first.
        ``until``: when the claim expires (``None``: when the journal forgets it).

        Not fsynced on its own: the journal's durable insert of the delivery comes next and
        carries it to the disk; without that insert the delivery was never acknowledged."""
        now = self._clock()

        def claim(conn: Connection) -> str:
            conn.execute(
                "DELETE FROM webhook_bodies WHERE hook = ? AND digest = ? AND expires_at < ?",
                (hook, digest, now),
            )
            conn.execute(
                "INSERT INTO webhook_bodies (hook, digest, delivery, expires_at, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (hook, digest) DO NOTHING",
                (hook, digest, delivery, until, now),
            )
            row = conn.execute(
                "SELECT delivery FROM webhook_bodies WHERE hook = ? AND digest = ?",
                (hook, digest),
            ).fetchone()
            return str(row[0])

        return await self._db.run(claim, durable=False)

    async def prune(self, before: float) -> int:
        """Forget claims made before ``before`` (the journal's window: the deliveries they
        point at are forgotten then too)."""
        return await delete_batched(self._db, "webhook_bodies", "created_at < ?", [before])
