"""What signed-in pages keep open (the chat's WebSocket, the control center's event stream),
each tied to the sign-in it was opened with, so that ending the sign-in ends them too.

The guard checks a request's session when it arrives; a socket that stays open would go on
carrying the conversation to a browser that was signed out meanwhile (by its own sign-out,
``switchboard web --sign-out-all``, a cluster's sign-out seen by the poll, or expiry). So
every response a handler prepares by hand goes through the guard's ``prepare_stream``,
which records it here under its sign-in, and when sign-ins end the guard ends their
streams: a WebSocket is closed with :data:`SIGNED_OUT_CODE` and :data:`SIGNED_OUT_REASON`
(the chat page shows the reason and does not reconnect), an event stream's connection is
dropped (the page finds it is signed out and goes to the sign-in page).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

SIGNED_OUT_CODE = 4401  # of the application's range (4000-4999): signed out, do not reconnect
SIGNED_OUT_REASON = "signed out: sign in again"


@dataclass(eq=False, slots=True)
class Stream:
    sign_in: str
    request: web.Request
    response: web.StreamResponse


class OpenStreams:
    def __init__(self) -> None:
        self._open: set[Stream] = set()
        self._closing: set[asyncio.Task[bool]] = set()  # closes waiting for the page's answer

    def add(self, sign_in: str, request: web.Request, response: web.StreamResponse) -> Stream:
        stream = Stream(sign_in, request, response)
        self._open.add(stream)
        return stream

    def discard(self, stream: Stream) -> None:
        """Its handler is done (the page closed it, or it was ended here)."""
        self._open.discard(stream)

    def end(self, signed_in: Callable[[str], bool]) -> int:
        """End every stream whose sign-in no longer goes on; how many. Does not wait for
        the pages: a lost laptop that never answers a close holds up nobody."""
        ended = [stream for stream in self._open if not signed_in(stream.sign_in)]
        for stream in ended:
            self._open.discard(stream)
            response = stream.response
            if isinstance(response, web.WebSocketResponse):
                closing = asyncio.create_task(
                    response.close(code=SIGNED_OUT_CODE, message=SIGNED_OUT_REASON.encode())
                )
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
            elif stream.request.transport is not None:
                stream.request.transport.close()  # the handler sees it gone and returns
        return len(ended)
