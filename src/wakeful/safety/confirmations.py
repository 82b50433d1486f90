"""Precheck→confirm tokens: an irreversible action runs only after its exact preview was seen.

A tool called without `confirmation_token` does nothing but a precheck: it issues a token bound to
its arguments and returns a preview (:func:`precheck_result`). Called again with the same arguments
and that token, it redeems the token and acts. A token is unguessable, expires, works once (also
under concurrency: the check and the mark are one store write) and confirms only the call that was
previewed; each refusal names the problem and what to do instead.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from ..errors import ToolError, UserError
from ..store.reader import StoredConfirmation
from ..tools.spec import ToolResult
from .idempotency import NotExecuted, canonical_json

if TYPE_CHECKING:
    from ..core.runtime_store import RuntimeStore
    from ..services import Services

__all__ = [
    "TOKEN_FIELD",
    "Confirmation",
    "ConfirmationRefused",
    "Confirmations",
    "confirmation_fingerprint",
    "precheck_result",
]

TOKEN_FIELD: Final = "confirmation_token"
_TOKEN_BYTES: Final = 24
_SHOWN_TOKEN_CHARS: Final = 48
_ERROR_EXCERPT_CHARS: Final = 2000


class ConfirmationRefused(NotExecuted):
    """A confirmation token cannot confirm this call; nothing was executed."""


@dataclass(frozen=True)
class Confirmation:
    """An issued token, when it stops working (UTC), and the preview it confirms."""

    token: str
    expires_at: datetime
    preview: Any


def _hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _bound(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in arguments.items() if name != TOKEN_FIELD}


def confirmation_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """The sha256 of the canonical JSON of (tool, arguments without the token field)."""
    return _hash([tool, _bound(arguments)])


def _field_hashes(arguments: Mapping[str, Any]) -> dict[str, str]:
    return {name: _hash(value) for name, value in _bound(arguments).items()}


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _shown(token: str) -> str:
    return repr(token if len(token) <= _SHOWN_TOKEN_CHARS else token[:_SHOWN_TOKEN_CHARS] + "…")


def _again(tool: str) -> str:
    return (
        f"run the precheck again: call {tool} without {TOKEN_FIELD}, check the new preview, "
        "then confirm with the new token."
    )


class Confirmations:
    """Issues and redeems the confirmation tokens of precheck→confirm tools, in the store."""

    def __init__(
        self,
        store: RuntimeStore,
        *,
        ttl_seconds: float = 600.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not ttl_seconds > 0:
            raise UserError(
                f"ttl_seconds must be positive, got {ttl_seconds!r}; the default is 600 (ten "
                "minutes)."
            )
        self.store = store
        self.ttl = timedelta(seconds=ttl_seconds)
        self.clock = clock or _utc_now

    @classmethod
    def of(cls, services: Services, *, ttl_seconds: float = 600.0) -> Confirmations:
        """The confirmations of the runtime's store; a ToolError when the runtime has none."""
        if services.store is None:
            raise ToolError(
                "This tool needs the runtime's store to keep confirmation tokens, and this "
                "runtime has none. Run it under `wakeful run` (which opens the store), or give "
                "Services a Store when embedding wakeful."
            )
        return cls(services.store, ttl_seconds=ttl_seconds)

    def _now(self) -> datetime:
        now = self.clock()
        if now.tzinfo is None:
            raise UserError(
                f"The confirmation clock returned the naive time {now.isoformat()}; return an "
                "aware UTC time, e.g. datetime.now(UTC)."
            )
        return now.astimezone(UTC)

    async def issue(self, tool: str, arguments: Mapping[str, Any], preview: Any) -> Confirmation:
        """A new token that confirms exactly this call of `tool`, valid for the TTL."""
        now = self._now()
        expires_at = now + self.ttl
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        await self.store.add_confirmation(
            StoredConfirmation(
                token=token,
                tool=tool,
                arguments_hash=confirmation_fingerprint(tool, arguments),
                field_hashes=_field_hashes(arguments),
                preview=preview,
                issued_at=now.isoformat(),
                expires_at=expires_at.isoformat(),
                state="issued",
                used_at=None,
                error=None,
            )
        )
        return Confirmation(token, expires_at, preview)

    async def redeem(self, token: str, tool: str, arguments: Mapping[str, Any]) -> None:
        """Mark `token` used for this call, or raise :class:`ConfirmationRefused` saying why.

        Refused: an unknown token, another tool's token, a used token, an expired token, and
        arguments that differ from the precheck's (the differing top-level fields are named).
        """
        now = self._now()
        fingerprint = confirmation_fingerprint(tool, arguments)
        fields = _field_hashes(arguments)

        def check(entry: StoredConfirmation | None) -> None:
            if entry is None:
                raise ConfirmationRefused(
                    f"The confirmation token {_shown(token)} is unknown: no precheck of {tool} "
                    f"issued it. Copy the token exactly as the precheck returned it, or "
                    + _again(tool)
                )
            if entry.tool != tool:
                raise ConfirmationRefused(
                    f"The confirmation token {_shown(token)} was issued by a precheck of "
                    f"{entry.tool}, not {tool}; a token confirms only the call it previewed. "
                    "To go on, " + _again(tool)
                )
            if entry.state != "issued":
                failed = f" That execution failed: {entry.error}" if entry.state == "failed" else ""
                raise ConfirmationRefused(
                    f"The confirmation token {_shown(token)} was already used at "
                    f"{entry.used_at}; a token confirms one execution.{failed} To act once more, "
                    + _again(tool)
                )
            expires_at = datetime.fromisoformat(entry.expires_at)
            if now >= expires_at:
                raise ConfirmationRefused(
                    f"The confirmation token {_shown(token)} expired at {entry.expires_at} "
                    f"(it is now {now.isoformat()}). To go on, " + _again(tool)
                )
            if entry.arguments_hash != fingerprint:
                differ = sorted(
                    name
                    for name in entry.field_hashes.keys() | fields.keys()
                    if entry.field_hashes.get(name) != fields.get(name)
                )
                raise ConfirmationRefused(
                    f"The arguments differ from the precheck's in {', '.join(differ)}; a token "
                    f"confirms exactly the previewed call. Call {tool} again with the previewed "
                    f"arguments and this token, or run the precheck again with the new ones "
                    f"(call {tool} without {TOKEN_FIELD})."
                )

        await self.store.use_confirmation(token, check, now)

    async def mark_failed(self, token: str, error: str) -> None:
        """Record that the confirmed execution failed; the token stays used."""
        if not await self.store.fail_confirmation(token, error[:_ERROR_EXCERPT_CHARS]):
            raise ToolError(
                f"The confirmation token {_shown(token)} is unknown, so its failure cannot be "
                "recorded. Pass the token that was redeemed for this call."
            )


def precheck_result(tool: str, confirmation: Confirmation, preview_text: str) -> ToolResult:
    """What a precheck returns: the preview, the token, its expiry and how to execute."""
    token = confirmation.token
    expires = confirmation.expires_at.astimezone(UTC).isoformat(timespec="seconds")
    text = (
        f"Precheck of {tool}: nothing has been done yet. This is what would happen:\n\n"
        f"{preview_text}\n\n"
        f"To execute, call {tool} again with the same arguments and "
        f"{TOKEN_FIELD}={token!r}. The token works once and expires at {expires}; "
        "after that, run the precheck again."
    )
    return ToolResult(
        text,
        structured={
            "status": "needs_confirmation",
            "confirmation_token": token,
            "expires_at": confirmation.expires_at.astimezone(UTC).isoformat(),
            "preview": confirmation.preview,
        },
    )
