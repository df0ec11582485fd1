"""Is a webhook delivery signed with the hook's secret? (pure; no I/O)

Three ways of signing the raw body with HMAC-SHA256 are accepted:

* ``X-Switchboard-Signature: sha256=<hex>``: HMAC of the body;
* ``X-Hub-Signature-256: sha256=<hex>``: the same, as GitHub sends it;
* Stripe-style, timestamped: ``Stripe-Signature`` (or ``X-Switchboard-Signature``)
  ``t=<unix time>,v1=<hex>``: HMAC of ``"<t>.<body>"``; refused when ``t`` is more than
  :data:`TOLERANCE` seconds away from now (a replayed old delivery).

Digests are compared in constant time. Nothing else (an IP address, a header's presence)
counts as authentication.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

SIGNATURE = "X-Switchboard-Signature"
GITHUB_SIGNATURE = "X-Hub-Signature-256"
STRIPE_SIGNATURE = "Stripe-Signature"
TOLERANCE = 300.0  # seconds a timestamped signature stays valid


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    scheme: str = ""  # "switchboard" | "github" | "timestamped"
    reason: str = ""  # why not, for the sender (never the expected digest)


def digest(secret: bytes, data: bytes) -> str:
    return hmac.new(secret, data, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes) -> str:
    """The ``X-Switchboard-Signature`` (and GitHub) header value for ``body``."""
    return f"sha256={digest(secret.encode(), body)}"


def sign_timestamped(secret: str, body: bytes, at: int) -> str:
    """A Stripe-style header value for ``body`` signed at Unix time ``at``."""
    return f"t={at},v1={digest(secret.encode(), str(at).encode() + b'.' + body)}"


def verify(secret: str, body: bytes, headers: Mapping[str, str], *, now: float) -> Verdict:
    """Whether ``headers`` carry a valid signature of ``body`` made with ``secret``."""
    key = secret.encode()
    ours = headers.get(SIGNATURE, "").strip()
    if ours.startswith("t=") or (not ours and STRIPE_SIGNATURE in headers):
        return _timestamped(key, body, ours or headers[STRIPE_SIGNATURE], now)
    for header, scheme in ((SIGNATURE, "switchboard"), (GITHUB_SIGNATURE, "github")):
        value = headers.get(header, "").strip()
        if not value:
            continue
        algorithm, _, given = value.partition("=")
        if algorithm.lower() != "sha256" or not given:
            return Verdict(False, reason=f"{header} must be sha256=<hex digest>")
        if hmac.compare_digest(given.strip().lower(), digest(key, body)):
            return Verdict(True, scheme)
        return Verdict(False, reason=f"{header} does not match the body")
    return Verdict(
        False,
        reason=f"unsigned: send {SIGNATURE}: sha256=<HMAC-SHA256 of the body with the hook's secret>",
    )


def _timestamped(key: bytes, body: bytes, header: str, now: float) -> Verdict:
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, []).append(value.strip())
    try:
        at = int(fields.get("t", [""])[0])
    except ValueError:
        return Verdict(False, reason="a timestamped signature needs t=<unix time>")
    if abs(now - at) > TOLERANCE:
        return Verdict(False, reason=f"the signature's time is more than {TOLERANCE:g} s off")
    expected = digest(key, str(at).encode() + b"." + body)
    if any(hmac.compare_digest(given.lower(), expected) for given in fields.get("v1", [])):
        return Verdict(True, "timestamped")
    return Verdict(False, reason="no v1 signature matches the body")
