"""The control center's jobs: the heartbeat and every scheduled job, with its next run and
how its last run ended (its turn, in the journal: ``cron:<job id>``, ``heartbeat:main``).

Pausing, running now and deleting go through :meth:`GatewayView.change_job` and
:meth:`GatewayView.change_heartbeat` (the code the ``cron`` tool and the scheduler use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.core.addressing import qualify
from gateway.core.turns import TurnKind
from gateway.store import Job, LastTurn
from gateway.web.control.names import Names

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

HEARTBEAT_SESSION = "heartbeat:main"  # gateway/runtime/schedule/heartbeat.py:SESSION
PREVIEW = 200


def job_session(job: Job) -> str:
    return qualify(job.agent, f"cron:{job.id}")


async def listing(gateway: GatewayView) -> dict[str, Any]:
    store = gateway.store
    jobs = await store.jobs.listing()
    names = await Names.load(store)
    last = await store.journal.last_turns([HEARTBEAT_SESSION, *map(job_session, jobs)])
    planned = gateway.schedule()
    state = await gateway.heartbeat_state()
    beat = next((i for i in planned or () if i.kind is TurnKind.HEARTBEAT), None)
    heartbeat = {
        "enabled": state.enabled,
        "paused": state.paused,
        "every": gateway.settings.heartbeat.interval_seconds,
        "next_run": beat.next_run.timestamp() if beat and beat.next_run else None,
        "target": state.target,
        "last": _outcome(last.get(HEARTBEAT_SESSION)),
        "last_skip": state.last_skip,
    }
    return {
        "scheduler": planned is not None,
        "heartbeat": heartbeat,
        "jobs": [
            {
                "id": job.id,
                "schedule": job.spec.describe(),
                "what": (job.message or job.prompt or "")[:PREVIEW],
                "kind": "message" if job.message else "task",
                "state": job.state,
                "next_run": job.next_run.timestamp() if job.next_run else None,
                "last_run": job.last_run.timestamp() if job.last_run else None,
                "runs": job.runs,
                "last": _outcome(last.get(job_session(job))),
                "target": names.session(job.chat.session_key).title,
                "owner": names.person(job.owner_key),
                "agent": job.agent,
            }
            for job in jobs
        ],
    }


def _outcome(turn: LastTurn | None) -> dict[str, Any] | None:
    return None if turn is None else {"state": turn.state, "at": turn.at}
