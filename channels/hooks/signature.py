"""Is a webhook delivery signed with the hook's secret? (pure; no I/O)

Four ways of signing with HMAC-SHA256 are accepted:

* ``X-Switchboard-Signature: t=<unix seconds>,v1=<hex>`` with ``X-Switchboard-Delivery:
  <id>``: HMAC of ``"<t>.<delivery id>.<body>"``. The time and the delivery id are signed,
  so a captured delivery can be neither re-sent under a new id nor replayed later. The id
  may not contain ``.``, which separates the signed fields (else ``a.b`` + ``c`` and ``a`` +
  ``b.c`` would sign the same);
* ``X-Switchboard-Signature: sha256=<hex>``: HMAC of the body alone, the format before the
  one above, accepted for one more release (:data:`LEGACY`);
* ``X-Hub-Signature-256: sha256=<hex>``: the same, as GitHub sends it;
* ``Stripe-Signature: t=<unix seconds>,v1=<hex>``: HMAC of ``"<t>.<body>"``.

A timestamped signature is refused when ``t`` is more than :data:`TOLERANCE` seconds away
from now, in the past (a replayed old delivery) or the future. Digests are compared in
constant time. Nothing else (an IP address, a header's presence) counts as authentication.
What none of them signs, the delivery id of the last three, is why the channel also
deduplicates on the body (gateway/store/webhook_bodies.py).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from channels.hooks.payload import DELIVERY, is_delivery_id
from gateway.core.credentials import same_secret

SIGNATURE = "X-Switchboard-Signature"
GITHUB_SIGNATURE = "X-Hub-Signature-256"
STRIPE_SIGNATURE = "Stripe-Signature"
TOLERANCE = 300  # seconds a timestamped signature stays valid, either side of now

Scheme = Literal["switchboard", "legacy", "github", "stripe"]
LEGACY: Scheme = "legacy"  # X-Switchboard-Signature: sha256=<HMAC of the body>


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    scheme: Scheme | None = None
    signed_at: int | None = None  # a timestamped signature's t
    reason: str = ""  # why not, for the sender (never the expected digest)


def digest(secret: bytes, data: bytes) -> str:
    return hmac.new(secret, data, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, delivery: str, at: int) -> str:
    """The ``X-Switchboard-Signature`` value for ``body`` sent as ``delivery`` at Unix time
    ``at`` (send ``delivery`` as ``X-Switchboard-Delivery``)."""
    signed = f"{at}.{delivery}.".encode() + body
    return f"t={at},v1={digest(secret.encode(), signed)}"


def sign_body(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value for ``body`` (GitHub's; also the old format of
    ``X-Switchboard-Signature``)."""
    return f"sha256={digest(secret.encode(), body)}"


def sign_stripe(secret: str, body: bytes, at: int) -> str:
    """A ``Stripe-Signature`` value for ``body`` signed at Unix time ``at``."""
    return f"t={at},v1={digest(secret.encode(), str(at).encode() + b'.' + body)}"


def verify(secret: str, body: bytes, headers: Mapping[str, str], *, now: float) -> Verdict:
    """Whether ``headers`` carry a valid signature of ``body`` made with ``secret``."""
    key = secret.encode()
    ours = headers.get(SIGNATURE, "").strip()
    if ours.startswith("t="):
        delivery = headers.get(DELIVERY, "").strip()
        if not is_delivery_id(delivery) or "." in delivery:
            return Verdict(
                False,
                reason=f'{SIGNATURE} t=...,v1=... signs "<t>.<delivery id>.<body>": send '
                f"{DELIVERY}: <id> (up to 200 printable characters, no spaces or dots)",
            )
        return _timestamped(key, body, ours, delivery, now)
    if not ours and STRIPE_SIGNATURE in headers:
        return _timestamped(key, body, headers[STRIPE_SIGNATURE], None, now)
    schemes: tuple[tuple[str, Scheme, str], ...] = (
        (SIGNATURE, LEGACY, "t=<unix seconds>,v1=<hex digest>"),
        (GITHUB_SIGNATURE, "github", "sha256=<hex digest>"),
    )
    for header, scheme, form in schemes:
        value = headers.get(header, "").strip()
        if not value:
            continue
        algorithm, _, given = value.partition("=")
        if algorithm.lower() != "sha256" or not given:
            return Verdict(False, reason=f"{header} must be {form}")
        if same_secret(given.strip().lower(), digest(key, body)):
            return Verdict(True, scheme)
        return Verdict(False, reason=f"{header} does not match the body")
    return Verdict(
        False,
        reason=f'unsigned: send {SIGNATURE}: t=<unix seconds>,v1=<HMAC-SHA256 of "<t>.<delivery '
        f"id>.<body>\" with the hook's secret> and {DELIVERY}: <id>",
    )


def _timestamped(key: bytes, body: bytes, header: str, delivery: str | None, now: float) -> Verdict:
    """``t=<t>,v1=<hex>[,v1=...]``: an HMAC of ``"<t>.<delivery>.<body>"`` (ours), or of
    ``"<t>.<body>"`` (Stripe's: ``delivery`` is ``None``)."""
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, []).append(value.strip())
    try:
        at = int(fields.get("t", [""])[0])
    except ValueError:
        return Verdict(False, reason="a timestamped signature needs t=<unix seconds>")
    if abs(now - at) > TOLERANCE:
        return Verdict(
            False,
            reason=f"the signature's time is more than {TOLERANCE} s from the gateway's "
            f"({'in the future' if at > now else 'too old'}): sign each delivery when it is sent",
        )
    signed = f"{at}." if delivery is None else f"{at}.{delivery}."
    expected = digest(key, signed.encode() + body)
    if any(same_secret(given.lower(), expected) for given in fields.get("v1", [])):
        return Verdict(True, "stripe" if delivery is None else "switchboard", signed_at=at)
    what = '"<t>.<body>"' if delivery is None else '"<t>.<delivery id>.<body>"'
    return Verdict(False, reason=f"no v1 signature matches the HMAC of {what}")
