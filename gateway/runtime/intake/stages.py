"""The inbound stages, declared as one list: what a message passes between its channel and
the journal, in order, as a web framework declares its middleware.

A stage is an :class:`~gateway.core.bus.InboundSink` wrapping the next one (made by calling
the stage with that next sink); the last is the bus, which journals the message. The list
itself is in :func:`gateway.runtime.build.build`: the access gate (who may talk, pairing,
group context), then understanding (voice notes transcribed, documents read, only for those
let in), then the journal; routing picks the message's session in the intake after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.core.bus import InboundSink

Stage = Callable[[InboundSink], InboundSink]


def chain(stages: Sequence[Stage], journal: InboundSink) -> InboundSink:
    """The sink channels publish to: the first stage, each handing on to the next."""
    sink = journal
    for stage in reversed(stages):
        sink = stage(sink)
    return sink
