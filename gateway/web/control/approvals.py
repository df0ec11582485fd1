"""The control center's approvals: the requests waiting for a decision, every argument in
full as the chat's ``/show ID`` shows it (secrets redacted, invisible characters spelled
out: :func:`gateway.core.text.verbatim.visible`), and the ones decided lately.

The page decides through :meth:`GatewayView.decide_approval`, the code ``/approve ID`` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.core.text.verbatim import visible
from gateway.store import ApprovalRequest
from gateway.web.control.names import Names

if TYPE_CHECKING:
    from gateway.web.view import GatewayView

DECIDED = 20


async def listing(gateway: GatewayView) -> dict[str, Any]:
    store = gateway.store
    names = await Names.load(store)
    return {
        "waiting": [_request(r, names) for r in await store.approval_requests.pending()],
        "decided": [_request(r, names) for r in await store.approval_requests.decided(DECIDED)],
    }


def _request(record: ApprovalRequest, names: Names) -> dict[str, Any]:
    requester = record.requester
    person = f"{requester.get('channel')}:{requester.get('sender_id')}"
    return {
        "id": record.id,
        "tool": record.tool,
        "reason": record.reason,
        "reach": visible(record.reach),
        "arguments": [
            {"name": visible(str(name)), "value": visible(str(value))}
            for name, value in record.arguments.items()
        ],
        "requester": names.known(person) or requester.get("sender_name") or names.person(person),
        "requester_id": person,
        "chat": names.session(record.session_key).title,
        "session": record.session_key,
        "state": record.state.value,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "decided_at": record.decided_at,
        "decided_by": record.decided_by,
    }
