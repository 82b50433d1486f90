"""Checking that a webhook delivery comes from who holds the endpoint's secret.

Three schemes, each an HMAC-SHA256 over the raw body exactly as it arrived (never a re-encoded
parse of it), compared in constant time with :func:`hmac.compare_digest`:

* Standard Webhooks (https://www.standardwebhooks.com): headers `webhook-id`,
  `webhook-timestamp` and `webhook-signature`; the signed text is `id.timestamp.body`; the
  secret is `whsec_` followed by base64; the header may hold several space-separated
  `v1,<base64>` signatures (during a secret rotation), any one of which may match.
* GitHub: `X-Hub-Signature-256: sha256=<hex>` over the body.
* Slack: `X-Slack-Signature: v0=<hex>` over `v0:<X-Slack-Request-Timestamp>:<body>`.

Schemes with a timestamp refuse a delivery signed outside the replay window (five minutes by
default, either way), so a captured request cannot be played back later; within the window, a
replay carries the same delivery id and the Inbox drops it as a duplicate. The reasons given in
:class:`SignatureRejected` name the header at fault and never the secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from typing import Final, Literal

__all__ = [
    "DEFAULT_REPLAY_WINDOW_SECONDS",
    "SignatureRejected",
    "VerificationScheme",
    "decode_standard_secret",
    "sign_github",
    "sign_slack",
    "sign_standard",
    "verify_github",
    "verify_slack",
    "verify_standard",
]

VerificationScheme = Literal["standard", "github", "slack", "none"]

DEFAULT_REPLAY_WINDOW_SECONDS: Final = 300.0
STANDARD_SECRET_PREFIX: Final = "whsec_"


class SignatureRejected(Exception):
    """A delivery failed verification; `reason` is a short sentence for the 401 answer (it names
    the header at fault, never the secret)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_standard_secret(secret: str) -> bytes:
    """The key bytes of a Standard Webhooks secret (`whsec_` + base64); ValueError naming the
    rule when it is not one."""
    encoded = secret.removeprefix(STANDARD_SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(
            "A Standard Webhooks secret is 'whsec_' followed by base64 (as the sender's "
            "dashboard shows it); this one is not valid base64."
        ) from exc
    if len(key) < 16:
        raise ValueError(
            f"A Standard Webhooks secret should hold at least 16 bytes of key; this one holds "
            f"{len(key)}. Generate a new one with the sender."
        )
    return key


def sign_standard(key: bytes, delivery_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header value for a delivery (for senders and tests)."""
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def sign_github(secret: bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` header value for a body."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def sign_slack(secret: bytes, timestamp: int, body: bytes) -> str:
    """The `X-Slack-Signature` header value for a body sent at `timestamp`."""
    signed = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()


def verify_standard(
    key: bytes,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    window: float = DEFAULT_REPLAY_WINDOW_SECONDS,
) -> str:
    """Check a Standard Webhooks delivery; return its `webhook-id`, or raise
    :class:`SignatureRejected`. `headers` has lower-case names."""
    delivery_id = _required(headers, "webhook-id")
    timestamp = _timestamp(headers, "webhook-timestamp", now=now, window=window)
    signatures = _required(headers, "webhook-signature")
    expected = sign_standard(key, delivery_id, timestamp, body).encode()
    offered = [s for s in signatures.split(" ") if s.startswith("v1,")]
    if not offered:
        raise SignatureRejected(
            "The webhook-signature header holds no v1 signature (expected 'v1,<base64>')."
        )
    # Compare with every offered signature, without stopping at a match, so the time taken
    # says nothing about which one matched.
    matched = False
    for candidate in offered:
        matched |= hmac.compare_digest(candidate.encode(), expected)
    if not matched:
        raise SignatureRejected("The webhook-signature does not match the endpoint's secret.")
    return delivery_id


def verify_github(secret: bytes, headers: Mapping[str, str], body: bytes) -> str:
    """Check a GitHub delivery; return its `X-GitHub-Delivery` id, or raise
    :class:`SignatureRejected`. GitHub signs no timestamp: a replay is recognised by its
    delivery id instead."""
    offered = _required(headers, "x-hub-signature-256")
    if not offered.startswith("sha256="):
        raise SignatureRejected("The X-Hub-Signature-256 header must start with 'sha256='.")
    if not hmac.compare_digest(offered.encode(), sign_github(secret, body).encode()):
        raise SignatureRejected("The X-Hub-Signature-256 does not match the endpoint's secret.")
    return _required(headers, "x-github-delivery")


def verify_slack(
    secret: bytes,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    window: float = DEFAULT_REPLAY_WINDOW_SECONDS,
) -> None:
    """Check a Slack request, or raise :class:`SignatureRejected`."""
    timestamp = _timestamp(headers, "x-slack-request-timestamp", now=now, window=window)
    offered = _required(headers, "x-slack-signature")
    if not offered.startswith("v0="):
        raise SignatureRejected("The X-Slack-Signature header must start with 'v0='.")
    expected = sign_slack(secret, timestamp, body)
    if not hmac.compare_digest(offered.encode(), expected.encode()):
        raise SignatureRejected("The X-Slack-Signature does not match the endpoint's secret.")


# Header names as their senders' documentation spells them, for the reasons given.
_SPELLED: Final = {
    "x-hub-signature-256": "X-Hub-Signature-256",
    "x-github-delivery": "X-GitHub-Delivery",
    "x-slack-signature": "X-Slack-Signature",
    "x-slack-request-timestamp": "X-Slack-Request-Timestamp",
}


def _required(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name, "").strip()
    if not value:
        raise SignatureRejected(f"The {_SPELLED.get(name, name)} header is missing.")
    return value


def _timestamp(headers: Mapping[str, str], name: str, *, now: float, window: float) -> int:
    text = _required(headers, name)
    name = _SPELLED.get(name, name)
    if not text.isdigit():
        raise SignatureRejected(f"The {name} header must be whole seconds since the epoch.")
    timestamp = int(text)
    skew = now - timestamp
    if abs(skew) > window:
        when = "old" if skew > 0 else "far in the future"
        raise SignatureRejected(
            f"The {name} is {abs(skew):.0f} s {when}, outside the replay window of "
            f"{window:.0f} s; a sender signs each attempt afresh, so this is a replay or a "
            "clock far off."
        )
    return timestamp
