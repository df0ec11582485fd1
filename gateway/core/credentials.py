"""Comparing the credentials requests carry with the ones the gateway knows.

A header's or a query's value is text that may hold anything a client sent: aiohttp keeps
bytes that are not UTF-8 as lone surrogates, which ``str.encode()`` refuses with an
exception, and ``hmac.compare_digest`` refuses text outside ASCII. Either was a 500 with a
traceback in the log for a request anyone could send (a webhook's signature, a bearer
token, a cookie). Here any text is only a wrong credential.
"""

from __future__ import annotations

import hmac


def as_bytes(text: str) -> bytes:
    """``text`` as bytes, whatever it holds (surrogates too): for hashing and comparing."""
    return text.encode("utf-8", "surrogatepass")


def same_secret(given: str, expected: str | bytes) -> bool:
    """Whether a credential a request carries (a token, a signature's hex digest) is
    ``expected``, compared in constant time."""
    wanted = expected if isinstance(expected, bytes) else as_bytes(expected)
    return hmac.compare_digest(as_bytes(given), wanted)
