"""Idempotency keys against a real store file: one run per key, replays, refusals, restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.safety.idempotency import (
    IdempotencyLedger,
    NotExecuted,
    arguments_fingerprint,
    check_key,
)
from wakeful.store.sqlite import Store
from wakeful.tools.spec import ToolResult

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 2, 7, 0, tzinfo=UTC)
ARGS: dict[str, Any] = {"to": "ann@example.com", "subject": "Invoice", "idempotency_key": "k1"}


class Action:
    """A stand-in for an external effect: counts how often it really ran."""

    def __init__(self, result: ToolResult | None = None) -> None:
        self.runs = 0
        self.result = result or ToolResult("sent", structured={"message_id": "m-1"})

    async def __call__(self) -> ToolResult:
        self.runs += 1
        return self.result


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "wakeful.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(db_path) as opened:
        yield opened


async def test_the_first_call_runs_and_a_repeat_replays_without_running(store: Store) -> None:
    ledger, action = IdempotencyLedger(store), Action()
    first = await ledger.run_once("send_email", "k1", ARGS, action)
    assert first == ToolResult("sent", structured={"message_id": "m-1"})

    again = await ledger.run_once("send_email", "k1", dict(ARGS), action)
    assert action.runs == 1
    assert again.content.startswith("sent\n\n[Idempotency key 'k1' was used before at 20")
    assert again.content.endswith("this is the first call's result, nothing ran again.]")
    assert again.structured == {"message_id": "m-1", "replayed": True}
    assert again.is_error is False


async def test_an_error_result_is_stored_and_replayed_too(store: Store) -> None:
    ledger, action = IdempotencyLedger(store), Action(ToolResult.error("SMTP said 451"))
    assert (await ledger.run_once("send_email", "k1", ARGS, action)).is_error
    again = await ledger.run_once("send_email", "k1", ARGS, action)
    assert action.runs == 1
    assert again.is_error and again.content.startswith("SMTP said 451\n\n[Idempotency key")


async def test_the_same_key_with_other_arguments_is_refused(store: Store) -> None:
    ledger, action = IdempotencyLedger(store), Action()
    await ledger.run_once("send_email", "k1", ARGS, action)
    with pytest.raises(
        ToolError, match=r"'k1' was already used for send_email with other.*new key"
    ):
        await ledger.run_once("send_email", "k1", {**ARGS, "subject": "Other"}, action)
    # A changed confirmation token is not another action: it changes between attempts.
    await ledger.run_once("send_email", "k1", {**ARGS, "confirmation_token": "t2"}, action)
    # Keys belong to one tool: the same key of another tool is another action.
    await ledger.run_once("call_webhook", "k1", ARGS, action)
    assert action.runs == 2


async def test_concurrent_calls_with_one_key_run_once(store: Store) -> None:
    ledger = IdempotencyLedger(store)
    runs = 0
    release, refused_all = anyio.Event(), anyio.Event()
    outcomes: list[str] = []

    async def slow() -> ToolResult:
        nonlocal runs
        runs += 1
        await release.wait()
        return ToolResult("done")

    async def call() -> None:
        try:
            outcomes.append((await ledger.run_once("pay", "k", {"amount": 5}, slow)).content)
        except ToolError as exc:
            outcomes.append(str(exc))
            if len(outcomes) == 4:
                refused_all.set()

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(call)
        with anyio.fail_after(5):
            await refused_all.wait()
        release.set()
    assert runs == 1
    assert outcomes[-1] == "done"
    assert all("is still running; check later" in o for o in outcomes[:-1])


async def test_a_run_that_raised_leaves_its_outcome_unknown(store: Store) -> None:
    ledger = IdempotencyLedger(store)

    async def broken() -> ToolResult:
        raise ConnectionResetError("connection reset by peer")

    with pytest.raises(ConnectionResetError):
        await ledger.run_once("send_email", "k1", ARGS, broken)
    action = Action()
    with pytest.raises(ToolError, match=r"outcome .* is unknown: it failed with Connection") as e:
        await ledger.run_once("send_email", "k1", ARGS, action)
    assert "Check the target" in str(e.value) and "new idempotency key" in str(e.value)
    assert action.runs == 0


async def test_a_cancelled_run_leaves_its_outcome_unknown(store: Store) -> None:
    ledger = IdempotencyLedger(store)
    started = anyio.Event()

    async def hangs() -> ToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with anyio.create_task_group() as tg:
        tg.start_soon(ledger.run_once, "send_email", "k1", ARGS, hangs)
        await started.wait()
        tg.cancel_scope.cancel()
    entry = await store.idempotency_entry("send_email", "k1")
    assert entry is not None and entry.state == "failed"
    with pytest.raises(ToolError, match="is unknown: it failed with CancelledError"):
        await ledger.run_once("send_email", "k1", ARGS, Action())


async def test_not_executed_releases_the_key_for_another_try(store: Store) -> None:
    ledger = IdempotencyLedger(store)

    async def refused() -> ToolResult:
        raise NotExecuted("The confirmation token expired; run the precheck again.")

    with pytest.raises(NotExecuted):
        await ledger.run_once("send_email", "k1", ARGS, refused)
    assert await store.idempotency_entry("send_email", "k1") is None
    action = Action()
    assert (await ledger.run_once("send_email", "k1", ARGS, action)).content == "sent"
    assert action.runs == 1


async def test_replays_survive_a_restart_and_a_claim_cut_off_by_a_crash_is_unknown(
    db_path: Path,
) -> None:
    action = Action()
    async with await Store.open(db_path) as store:
        await IdempotencyLedger(store).run_once("send_email", "done-key", ARGS, action)
        # A claim whose run never finished: what a crash in the middle of the action leaves.
        fingerprint = arguments_fingerprint("send_email", ARGS)
        claim = await store.claim_idempotency_key("send_email", "cut-key", fingerprint, T0)
        assert claim is None
    async with await Store.open(db_path) as store:
        ledger = IdempotencyLedger(store)
        again = await ledger.run_once("send_email", "done-key", ARGS, action)
        assert again.structured == {"message_id": "m-1", "replayed": True}
        with pytest.raises(ToolError, match="is unknown: the runtime stopped before it finished"):
            await ledger.run_once("send_email", "cut-key", ARGS, action)
    assert action.runs == 1


@pytest.mark.parametrize("key", ["", "x" * 201, "line\nbreak", "bell\x07", "tab\tkey"])
async def test_a_bad_key_is_refused_before_anything_runs(store: Store, key: str) -> None:
    action = Action()
    with pytest.raises(ToolError, match=r"idempotency key .* is invalid: a key is 1-200 printable"):
        await IdempotencyLedger(store).run_once("send_email", key, ARGS, action)
    assert action.runs == 0


def test_the_longest_and_unicode_keys_are_accepted() -> None:
    check_key("k" * 200)
    check_key("überweisung-2025-06 #3")


async def test_a_runtime_without_a_store_gets_a_tool_error_naming_the_fix() -> None:
    async with tool_services() as (services, _):
        with pytest.raises(ToolError, match=r"needs the runtime's store.*wakeful run"):
            IdempotencyLedger.of(services)
