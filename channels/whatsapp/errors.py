"""Meta's error codes as the outbox's error types.

* 130429 (throughput), 131056 (too many messages to one person), 80007 / 4 (account or app
  call limits): :class:`ThroughputExceeded`, a rate limit; the outbox holds the chat.
* 131047 (more than 24 hours since the person last wrote): :class:`WindowClosed`; only a
  template message may go, or the owner is told.
* 131026 (undeliverable: not on WhatsApp, old app, blocked us ...): :class:`Undeliverable`.
* A refused token (190), a bad request, a template the account does not have: permanent.
* 131000 / 131016 / 5xx / no answer: transient, the outbox retries with backoff.

Codes: https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes
"""

from __future__ import annotations

from channels.whatsapp.graph import GraphError, GraphUnreachable
from gateway.core.errors import (
    ChannelError,
    ChannelPermanentError,
    ChannelRateLimited,
    ChannelTransientError,
)

RE_ENGAGEMENT = 131047
UNDELIVERABLE = 131026
THROUGHPUT = 130429
PAIR_RATE = 131056
SPAM_RATE = 131048
_RATE_WAITS = {THROUGHPUT: 2.0, PAIR_RATE: 6.0, SPAM_RATE: 60.0, 80007: 60.0, 4: 60.0, 613: 60.0}
_TRANSIENT = {1, 2, 131000, 131016, 133004}
_TOKEN = {190, 0}


class ThroughputExceeded(ChannelRateLimited):
    """Meta asked us to slow down (130429 and kin)."""


class WindowClosed(ChannelPermanentError):
    """More than 24 hours since the person last wrote: free text is refused (131047)."""


class Undeliverable(ChannelPermanentError):
    """WhatsApp cannot deliver to this number (131026): not on WhatsApp, an old app, or the
    person blocked the business."""


def channel_error(exc: GraphError | GraphUnreachable) -> ChannelError:
    """The outbox's error for a failed Graph call."""
    if isinstance(exc, GraphUnreachable):
        return ChannelTransientError(f"cannot reach WhatsApp: {exc}")
    code = exc.code
    if code in _RATE_WAITS or exc.status == 429:
        wait = exc.retry_after if exc.retry_after is not None else _RATE_WAITS.get(code, 5.0)
        return ThroughputExceeded(wait, f"WhatsApp rate limit ({code}: {exc.message})")
    if code == RE_ENGAGEMENT:
        return WindowClosed(explain(code, exc.message))
    if code == UNDELIVERABLE:
        return Undeliverable(explain(code, exc.message))
    if code in _TRANSIENT or exc.status >= 500:
        return ChannelTransientError(f"WhatsApp failed ({exc})")
    if (code in _TOKEN and exc.status in (401, 403)) or code == 190:
        return ChannelPermanentError(
            f"WhatsApp refused the access token (SWITCHBOARD_WHATSAPP__ACCESS_TOKEN): {exc.message}"
        )
    return ChannelPermanentError(f"WhatsApp refused the message ({exc})")


def explain(code: int, message: str = "") -> str:
    """What a delivery failure means, for the owner's note and the log."""
    if code == RE_ENGAGEMENT:
        return (
            "more than 24 hours have passed since this person last wrote, and WhatsApp only "
            "delivers a template message then (set whatsapp.window_template)"
        )
    if code == UNDELIVERABLE:
        return (
            "WhatsApp could not deliver it (131026): the number may not be on WhatsApp, the "
            "app may be too old, or the person blocked this business"
        )
    return f"WhatsApp error {code}: {message}" if message else f"WhatsApp error {code}"
