"""Idempotency keys: an action that cannot be repeated safely runs at most once per key.

A tool that sends, pays or posts takes an `idempotency_key` from the model and wraps its action in
:meth:`IdempotencyLedger.run_once`. The key is claimed in the store *before* the action runs, so a
duplicate call, a concurrent call or a call after a restart finds the claim instead of acting
twice. Outcomes, error results included (the effect may have happened), are stored and replayed.
A run that raised or was cancelled, or that a crash cut off, leaves its outcome unknown: a repeat
says so and never runs the action blindly again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import anyio

from ..errors import ToolError
from ..tools.spec import ToolResult

if TYPE_CHECKING:
    from ..core.runtime_store import RuntimeStore
    from ..services import Services
    from ..store.reader import IdempotencyEntry

__all__ = [
    "MAX_KEY_CHARS",
    "UNBOUND_FIELDS",
    "IdempotencyLedger",
    "NotExecuted",
    "arguments_fingerprint",
    "canonical_json",
    "check_key",
]

MAX_KEY_CHARS: Final = 200
# Fields that change between attempts at one action, so they are left out of its fingerprint.
UNBOUND_FIELDS: Final = frozenset({"idempotency_key", "confirmation_token"})
_ERROR_EXCERPT_CHARS: Final = 2000


class NotExecuted(ToolError):
    """Raised inside a `run_once` action that was refused before it had any effect.

    The key's claim is released, so the same key can be used again once the problem is fixed
    (e.g. an expired confirmation token). Raise it only before acting: any other exception leaves
    the outcome unknown.
    """


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def arguments_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """The sha256 of the canonical JSON of (tool, arguments without :data:`UNBOUND_FIELDS`)."""
    bound = {name: value for name, value in arguments.items() if name not in UNBOUND_FIELDS}
    return hashlib.sha256(canonical_json([tool, bound]).encode()).hexdigest()


def check_key(key: str) -> None:
    """Refuse a key that is empty, longer than 200 characters or not printable."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS or not key.isprintable():
        raise ToolError(
            f"The idempotency key {key!r} is invalid: a key is 1-{MAX_KEY_CHARS} printable "
            "characters (no newlines or control characters). Use a short unique string for "
            "this one action, e.g. 'invoice-2025-06-reminder-ann'."
        )


def _result_json(result: ToolResult) -> str:
    return json.dumps(
        {"content": result.content, "is_error": result.is_error, "structured": result.structured},
        ensure_ascii=False,
        default=str,
    )


def _replayed(entry: IdempotencyEntry) -> ToolResult:
    assert entry.result is not None
    stored = json.loads(entry.result)
    structured = stored.get("structured")
    if isinstance(structured, dict):
        structured = {**structured, "replayed": True}
    note = (
        f"[Idempotency key {entry.key!r} was used before at {entry.started_at}; this is the "
        "first call's result, nothing ran again.]"
    )
    content = f"{stored['content']}\n\n{note}" if stored["content"] else note
    return ToolResult(content, is_error=bool(stored["is_error"]), structured=structured)


def _excerpt(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_ERROR_EXCERPT_CHARS]


class IdempotencyLedger:
    """Runs keyed actions at most once, with their claims and outcomes kept in the store."""

    def __init__(self, store: RuntimeStore) -> None:
        self.store = store

    @classmethod
    def of(cls, services: Services) -> IdempotencyLedger:
        """The ledger of the runtime's store; a ToolError when the runtime has no store."""
        if services.store is None:
            raise ToolError(
                "This tool needs the runtime's store to remember idempotency keys, and this "
                "runtime has none. Run it under `wakeful run` (which opens the store), or give "
                "Services a Store when embedding wakeful."
            )
        return cls(services.store)

    async def run_once(
        self,
        tool: str,
        key: str,
        arguments: Mapping[str, Any],
        run: Callable[[], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Run `run` for the first call with (tool, key); replay its result for a repeat.

        * First call: claims the key, runs, stores the result (error results too, since the
          effect may have happened) and returns it.
        * Repeat with the same arguments (the fields in :data:`UNBOUND_FIELDS` aside): the stored
          result with a note saying so, and ``"replayed": true`` in a dict `structured`.
        * Same key, other arguments: ToolError; use a new key for a new action.
        * The first run is still going: ToolError, check later.
        * The first run raised, was cancelled or was cut off by a restart: ToolError saying the
          outcome is unknown; check the target before retrying with a new key.
        * `run` raised :class:`NotExecuted`: the claim is released and the error passes on.
        """
        check_key(key)
        fingerprint = arguments_fingerprint(tool, arguments)
        entry = await self.store.claim_idempotency_key(tool, key, fingerprint, datetime.now(UTC))
        if entry is not None:
            elsewhere = (
                entry.state == "running"
                and entry.owner != self.store.instance_id
                and await self.store.idempotency_keys.running_elsewhere(entry)
            )
            return self._repeat(entry, fingerprint, running_elsewhere=elsewhere)
        try:
            result = await run()
        except NotExecuted:
            with anyio.CancelScope(shield=True):
                await self.store.release_idempotency_key(tool, key)
            raise
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await self.store.finish_idempotency_key(
                    tool, key, datetime.now(UTC), error=_excerpt(exc)
                )
            raise
        with anyio.CancelScope(shield=True):
            await self.store.finish_idempotency_key(
                tool, key, datetime.now(UTC), result=_result_json(result)
            )
        return result

    def _repeat(
        self, entry: IdempotencyEntry, fingerprint: str, *, running_elsewhere: bool = False
    ) -> ToolResult:
        """The answer to a key used before: the stored outcome, or why there is none.
        `running_elsewhere`: the claim is another live worker's, still at work."""
        key, tool = entry.key, entry.tool
        if entry.arguments_hash != fingerprint:
            raise ToolError(
                f"The idempotency key {key!r} was already used for {tool} with other arguments "
                f"(at {entry.started_at}). A key names one action: use a new key for this one."
            )
        if entry.state == "done":
            return _replayed(entry)
        if entry.state == "running" and (
            entry.owner == self.store.instance_id or running_elsewhere
        ):
            raise ToolError(
                f"The call of {tool} with idempotency key {key!r} that started at "
                f"{entry.started_at} is still running; check later "
                "instead of calling it again."
            )
        # Failed, or claimed by an earlier run of the runtime that stopped before it finished.
        why = (
            f"it failed with {entry.error}"
            if entry.state == "failed"
            else "the runtime stopped before it finished"
        )
        raise ToolError(
            f"The outcome of the call of {tool} with idempotency key {key!r} (started at "
            f"{entry.started_at}) is unknown: {why}, so it may or may not have taken effect. "
            "Nothing was run again. Check the target (e.g. the sent folder or the receiving "
            "system) before retrying, and retry with a new idempotency key."
        )
