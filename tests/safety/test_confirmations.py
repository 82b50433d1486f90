"""Precheck→confirm tokens against a real store file, with a clock the tests move."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from tool_services import tool_services
from wakeful.errors import ToolError, UserError
from wakeful.safety.confirmations import (
    Confirmation,
    ConfirmationRefused,
    Confirmations,
    precheck_result,
)
from wakeful.safety.idempotency import IdempotencyLedger
from wakeful.store.sqlite import Store
from wakeful.tools.spec import ToolResult

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 2, 7, 0, tzinfo=UTC)
ARGS: dict[str, Any] = {"to": "ann@example.com", "subject": "Invoice", "body": "Hi Ann"}
PREVIEW = {"to": "ann@example.com", "subject": "Invoice", "size": 6}


class Clock:
    """A clock that moves only when the test says so."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "wakeful.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(db_path) as opened:
        yield opened


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def confirmations(store: Store, clock: Clock) -> Confirmations:
    return Confirmations(store, ttl_seconds=600, clock=clock)


def with_token(confirmation: Confirmation, **changes: Any) -> dict[str, Any]:
    return {**ARGS, **changes, "confirmation_token": confirmation.token}


async def test_a_token_confirms_its_call_once(confirmations: Confirmations) -> None:
    issued = await confirmations.issue("send_email", ARGS, PREVIEW)
    assert issued.expires_at == T0 + timedelta(minutes=10)
    assert issued.preview == PREVIEW
    await confirmations.redeem(issued.token, "send_email", with_token(issued))
    with pytest.raises(
        ConfirmationRefused, match=r"already used at 2025-06-02T07:00.*one execution"
    ) as e:
        await confirmations.redeem(issued.token, "send_email", with_token(issued))
    assert "run the precheck again: call send_email without confirmation_token" in str(e.value)


async def test_tokens_are_long_random_and_distinct(confirmations: Confirmations) -> None:
    tokens = {(await confirmations.issue("send_email", ARGS, PREVIEW)).token for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(token) >= 32 for token in tokens)


async def test_concurrent_redeems_of_one_token_succeed_once(confirmations: Confirmations) -> None:
    issued = await confirmations.issue("send_email", ARGS, PREVIEW)
    succeeded: list[int] = []
    refused: list[str] = []

    async def redeem(i: int) -> None:
        try:
            await confirmations.redeem(issued.token, "send_email", with_token(issued))
        except ConfirmationRefused as exc:
            refused.append(str(exc))
        else:
            succeeded.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(redeem, i)
    assert len(succeeded) == 1
    assert len(refused) == 9 and all("already used" in r for r in refused)


async def test_a_token_expires_after_its_ttl(confirmations: Confirmations, clock: Clock) -> None:
    early = await confirmations.issue("send_email", ARGS, PREVIEW)
    late = await confirmations.issue("send_email", ARGS, PREVIEW)
    clock.advance(599)
    await confirmations.redeem(early.token, "send_email", with_token(early))
    clock.advance(1)
    with pytest.raises(ConfirmationRefused, match=r"expired at 2025-06-02T07:10:00") as e:
        await confirmations.redeem(late.token, "send_email", with_token(late))
    assert "To go on, run the precheck again" in str(e.value)


async def test_changed_arguments_are_refused_naming_the_fields(
    confirmations: Confirmations,
) -> None:
    issued = await confirmations.issue("send_email", ARGS, PREVIEW)
    changed = {**with_token(issued, subject="Paid"), "cc": "bob@example.com"}
    changed.pop("body")
    with pytest.raises(ConfirmationRefused, match=r"differ from the precheck's in body, cc, subj"):
        await confirmations.redeem(issued.token, "send_email", changed)
    # A refused attempt does not use the token up.
    await confirmations.redeem(issued.token, "send_email", with_token(issued))


async def test_another_tools_token_and_an_unknown_token_are_refused(
    confirmations: Confirmations,
) -> None:
    issued = await confirmations.issue("send_email", ARGS, PREVIEW)
    with pytest.raises(ConfirmationRefused, match="issued by a precheck of send_email, not call_w"):
        await confirmations.redeem(issued.token, "call_webhook", with_token(issued))
    with pytest.raises(ConfirmationRefused, match=r"token 'made-up' is unknown.*Copy the token"):
        await confirmations.redeem("made-up", "send_email", ARGS)
    await confirmations.redeem(issued.token, "send_email", with_token(issued))


async def test_a_failed_execution_is_recorded_and_the_token_stays_used(
    confirmations: Confirmations, store: Store
) -> None:
    issued = await confirmations.issue("send_email", ARGS, PREVIEW)
    await confirmations.redeem(issued.token, "send_email", with_token(issued))
    await confirmations.mark_failed(issued.token, "SMTP 554: relay denied")
    stored = await store.confirmation(issued.token)
    assert stored is not None and stored.state == "failed"
    assert stored.error == "SMTP 554: relay denied"
    with pytest.raises(ConfirmationRefused, match=r"already used.*failed: SMTP 554: relay denied"):
        await confirmations.redeem(issued.token, "send_email", with_token(issued))
    with pytest.raises(ToolError, match="'nope' is unknown, so its failure cannot be recorded"):
        await confirmations.mark_failed("nope", "boom")


async def test_a_token_survives_a_restart(db_path: Path, clock: Clock) -> None:
    async with await Store.open(db_path) as store:
        issued = await Confirmations(store, clock=clock).issue("send_email", ARGS, PREVIEW)
    async with await Store.open(db_path) as store:
        confirmations = Confirmations(store, clock=clock)
        await confirmations.redeem(issued.token, "send_email", with_token(issued))
        stored = await store.confirmation(issued.token)
        assert stored is not None and stored.preview == PREVIEW and stored.state == "used"


async def test_inside_run_once_a_refused_token_leaves_the_key_free(
    confirmations: Confirmations, store: Store, clock: Clock
) -> None:
    ledger = IdempotencyLedger(store)
    issued = await confirmations.issue("send_email", ARGS, PREVIEW)
    sent: list[str] = []

    def action(token: str) -> Any:
        async def run() -> ToolResult:
            await confirmations.redeem(token, "send_email", {**ARGS, "confirmation_token": token})
            sent.append(token)
            return ToolResult("sent")

        return run

    clock.advance(601)
    with pytest.raises(ConfirmationRefused, match="expired"):
        await ledger.run_once("send_email", "k1", ARGS, action(issued.token))
    fresh = await confirmations.issue("send_email", ARGS, PREVIEW)
    assert (await ledger.run_once("send_email", "k1", ARGS, action(fresh.token))).content == "sent"
    replay = await ledger.run_once("send_email", "k1", ARGS, action(fresh.token))
    assert replay.content.startswith("sent\n\n[Idempotency key 'k1'")
    assert sent == [fresh.token]


def test_a_precheck_result_carries_the_preview_the_token_and_the_way_on() -> None:
    confirmation = Confirmation("tok-123", T0 + timedelta(minutes=10), PREVIEW)
    result = precheck_result("send_email", confirmation, "To: ann@example.com\nSubject: Invoice")
    assert not result.is_error
    assert "To: ann@example.com\nSubject: Invoice" in result.content
    assert (
        "call send_email again with the same arguments and confirmation_token='tok-123'"
        in result.content
    )
    assert "expires at 2025-06-02T07:10:00+00:00" in result.content
    assert result.structured == {
        "status": "needs_confirmation",
        "confirmation_token": "tok-123",
        "expires_at": "2025-06-02T07:10:00+00:00",
        "preview": PREVIEW,
    }


async def test_bad_settings_are_refused(store: Store) -> None:
    with pytest.raises(UserError, match="ttl_seconds must be positive, got 0"):
        Confirmations(store, ttl_seconds=0)
    naive = Confirmations(store, clock=lambda: datetime(2025, 1, 1))
    with pytest.raises(UserError, match="naive time 2025-01-01T00:00:00"):
        await naive.issue("send_email", ARGS, PREVIEW)
    async with tool_services() as (services, _):
        with pytest.raises(ToolError, match="needs the runtime's store"):
            Confirmations.of(services)
        services.store = store
        assert Confirmations.of(services, ttl_seconds=5).ttl == timedelta(seconds=5)
