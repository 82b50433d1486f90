"""The safety and channel repositories (idempotency keys, confirmation tokens, the audit log,
channel cursors, connected channels) behave the same on every backend: each test runs on the
SQLite store (a file) and on the PostgreSQL store (a fresh database on a real server, see
tests/servers/postgres.py; skipped where PostgreSQL is missing).

Moved here from the SQLite-only tests (same behaviours, now on both backends): from
test_repositories.py the safety records through their repositories; from test_channel_cursors.py
cursors kept per channel across a restart, connected channels kept, replaced and removed, and a
hand-edited connected channel reported by name. The races (one idempotency key claimed at once,
one token redeemed at once) run within one store on both backends, and between two workers
(two stores on one database) on PostgreSQL, the one backend several workers share.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import anyio
import psycopg
import pytest
from store_records import OpenStore, WriteRaw, unreadable

from wakeful.core.records import IdempotencyEntry, StoredConfirmation
from wakeful.core.runtime_store import RuntimeStore
from wakeful.errors import StoreError

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def confirmation(token: str = "tok", tool: str = "send") -> StoredConfirmation:
    return StoredConfirmation(
        token=token,
        tool=tool,
        arguments_hash="h",
        field_hashes={"to": "h1"},
        preview={"to": "ann", "body": "héllo ✓"},
        issued_at=T0.isoformat(),
        expires_at=(T0 + timedelta(minutes=5)).isoformat(),
        state="issued",
        used_at=None,
        error=None,
    )


def only_once(entry: StoredConfirmation | None) -> None:
    """A check as the safety layer makes it: refuse a token that is unknown or already used."""
    if entry is None or entry.state != "issued":
        raise LookupError(f"the token is {'unknown' if entry is None else entry.state}")


# --- idempotency keys ----------------------------------------------------------------------------


async def test_a_key_is_claimed_finished_and_released(open_store: OpenStore) -> None:
    async with open_store() as store:
        keys = store.idempotency_keys
        assert await keys.claim("send", "k", "h", T0) is None
        again = await keys.claim("send", "k", "other hash", T0 + timedelta(seconds=1))
        assert again == IdempotencyEntry(
            "send", "k", "h", "running", store.instance_id, T0.isoformat(timespec="microseconds"),
            None, None, None,
        )  # fmt: skip
        await keys.finish("send", "k", T0 + timedelta(seconds=2), result='"ok"')
        entry = await keys.entry("send", "k")
        assert entry is not None
        assert (entry.state, entry.result, entry.error) == ("done", '"ok"', None)
        assert entry.finished_at == "2025-01-01T00:00:02.000000+00:00"
        await keys.release("send", "k")
        assert await keys.entry("send", "k") is None
        assert await keys.claim("send", "k", "h2", T0) is None  # free again once released


async def test_a_failed_outcome_is_kept_with_its_error(open_store: OpenStore) -> None:
    async with open_store() as store:
        keys = store.idempotency_keys
        await keys.claim("send", "k", "h", T0)
        await keys.claim("send", "other key", "h", T0)
        await keys.finish("send", "k", T0, error="ConnectionError: reset")
        entry = await keys.entry("send", "k")
        assert entry is not None and (entry.state, entry.error) == (
            "failed",
            "ConnectionError: reset",
        )
        other = await keys.entry("send", "other key")
        assert other is not None and other.state == "running"
        assert await keys.entry("other tool", "k") is None


async def test_times_in_other_zones_are_stored_as_the_same_utc_instant(
    open_store: OpenStore,
) -> None:
    tokyo = timezone(timedelta(hours=9))
    async with open_store() as store:
        await store.idempotency_keys.claim("send", "k", "h", datetime(2025, 1, 1, 9, tzinfo=tokyo))
        entry = await store.idempotency_keys.entry("send", "k")
    assert entry is not None and entry.started_at == "2025-01-01T00:00:00.000000+00:00"


async def test_a_claim_of_an_earlier_run_is_kept_under_its_owner(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.idempotency_keys.claim("send", "k", "h", T0)
        first_owner = store.instance_id
    async with open_store() as store:
        assert store.instance_id != first_owner
        entry = await store.idempotency_keys.claim("send", "k", "h", T0)
    assert entry is not None and (entry.state, entry.owner) == ("running", first_owner)


async def test_concurrent_claims_of_one_key_have_one_winner(open_store: OpenStore) -> None:
    async with open_store() as store:
        outcomes: list[IdempotencyEntry | None] = []

        async def claim(n: int) -> None:
            outcomes.append(await store.idempotency_keys.claim("send", "k", f"h{n}", T0))

        async with anyio.create_task_group() as group:
            for n in range(20):
                group.start_soon(claim, n)
    winners = [o for o in outcomes if o is None]
    assert len(outcomes) == 20 and len(winners) == 1
    hashes = {o.arguments_hash for o in outcomes if o is not None}
    assert len(hashes) == 1  # every loser sees the winner's claim


async def test_two_workers_claiming_the_same_keys_at_once_win_each_key_once(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    keys = [f"k{i}" for i in range(30)]
    won: dict[str, list[str]] = {key: [] for key in keys}
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):

        async def claim(store: PostgresStore, key: str) -> None:
            if await store.idempotency_keys.claim("send", key, "h", T0) is None:
                won[key].append(store.instance_id)

        async with anyio.create_task_group() as group:
            for key in keys:
                group.start_soon(claim, worker_a, key)
                group.start_soon(claim, worker_b, key)
        owners = {key: await worker_b.idempotency_keys.entry("send", key) for key in keys}
    assert all(len(winners) == 1 for winners in won.values()), won
    assert all(entry is not None and entry.owner == won[key][0] for key, entry in owners.items())


async def test_two_workers_claiming_keys_in_opposite_orders_both_go_on(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    keys = [f"k{i}" for i in range(30)]
    won: dict[str, int] = dict.fromkeys(keys, 0)
    failed: list[StoreError] = []
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):

        async def claim(store: PostgresStore, key: str) -> None:
            try:
                if await store.idempotency_keys.claim("send", key, "h", T0) is None:
                    won[key] += 1
            except StoreError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as group:
            for key in keys:
                group.start_soon(claim, worker_a, key)
            for key in reversed(keys):
                group.start_soon(claim, worker_b, key)
    if failed:
        raise failed[0]
    assert won == dict.fromkeys(keys, 1)


async def test_another_workers_claim_is_running_elsewhere_while_that_worker_lives(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    async def run(sql: str, params: tuple[Any, ...] = ()) -> None:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as db:
            await db.execute(sql.encode(), params)

    async with await PostgresStore.open(postgres_url) as store:
        keys = store.idempotency_keys
        # Worker w-b registered a minute ago with 30 s leases, then claimed `k` in its run `run-b`.
        await run(
            "INSERT INTO workers (id, host, pid, lease_seconds, started_at, heartbeat_at) "
            "VALUES ('w-b', 'host-b', 1, 30, clock_timestamp() - interval '1 minute', "
            "clock_timestamp())"
        )
        for key, worker in (("k", "w-b"), ("no worker", None)):
            await run(
                "INSERT INTO idempotency_keys (tool, key, arguments_hash, state, owner, "
                "started_at, worker) VALUES ('send', %s, 'h', 'running', 'run-b', %s, %s)",
                (key, T0, worker),
            )
        await keys.claim("send", "mine", "h", T0)

        async def elsewhere(key: str) -> bool:
            entry = await keys.entry("send", key)
            assert entry is not None
            return await keys.running_elsewhere(entry)

        assert await elsewhere("k")
        assert not await elsewhere("no worker")  # a store without workers: one process
        assert not await elsewhere("mine")  # running here, not elsewhere
        await run("UPDATE workers SET heartbeat_at = clock_timestamp() - interval '31 seconds'")
        assert not await elsewhere("k")  # its heartbeat lapsed: it is dead
        await run("UPDATE workers SET heartbeat_at = clock_timestamp()")
        assert await elsewhere("k")
        await run("UPDATE workers SET started_at = clock_timestamp()")
        assert not await elsewhere("k")  # restarted under its name since: another run
        await run("UPDATE workers SET started_at = started_at - interval '1 hour'")
        assert await elsewhere("k")
        await run("UPDATE workers SET stopped_at = clock_timestamp()")
        assert not await elsewhere("k")  # stopped
        await run("UPDATE workers SET stopped_at = NULL")
        await keys.finish("send", "k", T0, result='"sent"')
        assert not await elsewhere("k")  # finished: replayed, not running


# --- confirmation tokens -------------------------------------------------------------------------


async def test_a_token_is_stored_used_and_failed(open_store: OpenStore) -> None:
    async with open_store() as store:
        token = confirmation()
        await store.confirmations.add(token)
        assert await store.confirmations.get("tok") == token
        seen: list[StoredConfirmation | None] = []
        await store.confirmations.use("tok", seen.append, T0 + timedelta(seconds=3))
        assert seen == [token]
        used = await store.confirmations.get("tok")
        assert used is not None and (used.state, used.used_at) == (
            "used",
            "2025-01-01T00:00:03.000000+00:00",
        )
        assert await store.confirmations.fail("tok", "bounced")
        assert not await store.confirmations.fail("unknown", "bounced")
        stored = await store.confirmations.get("tok")
        assert stored is not None and (stored.state, stored.error) == ("failed", "bounced")
        assert await store.confirmations.get("unknown") is None


async def test_a_refused_check_leaves_the_token_unused(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.confirmations.add(confirmation())

        def refuse(entry: StoredConfirmation | None) -> None:
            raise LookupError("the arguments differ in: to")

        with pytest.raises(LookupError, match="differ in: to"):
            await store.confirmations.use("tok", refuse, T0)
        with pytest.raises(LookupError, match="unknown"):
            await store.confirmations.use("no such token", only_once, T0)
        assert await store.confirmations.get("tok") == confirmation()
        await store.confirmations.use("tok", only_once, T0)  # still usable, once


async def test_a_token_survives_a_restart_and_is_still_used_once(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.confirmations.add(confirmation())
    async with open_store() as store:
        await store.confirmations.use("tok", only_once, T0)
    async with open_store() as store:
        with pytest.raises(LookupError, match="used"):
            await store.confirmations.use("tok", only_once, T0)


async def test_a_token_redeemed_concurrently_is_used_once(open_store: OpenStore) -> None:
    async with open_store() as store:
        await store.confirmations.add(confirmation())
        used, refused = [], []

        async def redeem() -> None:
            try:
                await store.confirmations.use("tok", only_once, T0)
            except LookupError as exc:
                refused.append(exc)
            else:
                used.append(True)

        async with anyio.create_task_group() as group:
            for _ in range(10):
                group.start_soon(redeem)
    assert (len(used), len(refused)) == (1, 9)


async def test_a_token_redeemed_by_two_workers_at_once_is_used_once(
    postgres_url: str,
) -> None:
    from wakeful.store.postgres import PostgresStore

    tokens = [f"tok{i}" for i in range(20)]
    used: dict[str, int] = dict.fromkeys(tokens, 0)
    async with (
        await PostgresStore.open(postgres_url) as worker_a,
        await PostgresStore.open(postgres_url) as worker_b,
    ):
        for token in tokens:
            await worker_a.confirmations.add(confirmation(token))

        async def redeem(store: PostgresStore, token: str) -> None:
            try:
                await store.confirmations.use(token, only_once, T0)
            except LookupError:
                return
            used[token] += 1

        async with anyio.create_task_group() as group:
            for token in tokens:
                group.start_soon(redeem, worker_a, token)
                group.start_soon(redeem, worker_b, token)
    assert used == dict.fromkeys(tokens, 1)


# --- the audit log -------------------------------------------------------------------------------


def audit(store: RuntimeStore, n: int, *, session: str = "main", tool: str = "send") -> None:
    store.audit_log.add_nowait(
        ts=T0 + timedelta(seconds=n),
        session=session,
        tool=tool,
        call_id=f"call_{n}",
        status="ok" if n % 2 else "error",
        duration_ms=1.5 * n,
        data={"arguments": {"to": "ann", "n": n}, "note": "héllo ✓"},
    )


async def test_audited_calls_are_read_back_in_order_and_filtered(open_store: OpenStore) -> None:
    async with open_store() as store:
        for n in range(6):
            audit(store, n, session="main" if n < 4 else "other", tool="send" if n % 3 else "read")
        await store.flush()
        rows = await store.audit_log.rows()
        assert [r.call_id for r in rows] == [f"call_{n}" for n in range(6)]
        first = rows[1]
        assert (first.ts, first.session, first.tool, first.status, first.duration_ms) == (
            "2025-01-01T00:00:01.000000+00:00",
            "main",
            "send",
            "ok",
            1.5,
        )
        assert first.data == {"arguments": {"to": "ann", "n": 1}, "note": "héllo ✓"}
        log = store.audit_log
        assert [r.call_id for r in await log.rows(tool="read")] == ["call_0", "call_3"]
        assert [r.call_id for r in await log.rows(session="other")] == ["call_4", "call_5"]
        since = await log.rows(since=T0 + timedelta(seconds=2), session="main")
        assert [r.call_id for r in since] == ["call_2", "call_3"]
        tokyo = timezone(timedelta(hours=9))
        since_in_tokyo = await log.rows(since=datetime(2025, 1, 1, 9, 0, 4, tzinfo=tokyo))
        assert [r.call_id for r in since_in_tokyo] == ["call_4", "call_5"]
        page = await log.rows(after_seq=rows[2].seq, limit=2)
        assert [r.call_id for r in page] == ["call_3", "call_4"]
        assert await log.rows(limit=0) == [] and await log.rows(tool="other") == []


async def test_audit_records_survive_a_restart(open_store: OpenStore) -> None:
    async with open_store() as store:
        audit(store, 1)  # not flushed: closing the store commits it
    async with open_store() as store:
        assert [r.call_id for r in await store.audit_log.rows()] == ["call_1"]


# --- channel cursors and connected channels ------------------------------------------------------


async def test_cursors_are_kept_per_channel_and_survive_a_restart(open_store: OpenStore) -> None:
    async with open_store() as store:
        cursors = store.channel_cursors
        assert await cursors.get("email:work", "uid") is None
        await cursors.put("email:work", "uid", "41")
        await cursors.put("email:work", "uid", "42")
        await cursors.put_many("email:home", {"uidvalidity": "7", "uid": "3"})
        assert await cursors.get("email:work", "uid") == "42"
        assert await cursors.get("email:home", "uid") == "3"
    async with open_store() as store:
        assert await store.channel_cursors.get("email:work", "uid") == "42"
        assert await store.channel_cursors.get("email:home", "uidvalidity") == "7"
        await store.channel_cursors.forget("email:home")
    async with open_store() as store:
        assert await store.channel_cursors.get("email:home", "uid") is None
        assert await store.channel_cursors.get("email:home", "uidvalidity") is None
        assert await store.channel_cursors.get("email:work", "uid") == "42"


async def test_connected_channels_are_kept_replaced_and_removed(open_store: OpenStore) -> None:
    async with open_store() as store:
        channels = store.connected_channels
        await channels.save("webhook:ci", "webhook", {"path": "/ci"}, {})
        await channels.save("email:work", "email", {"host": "imap.x"}, {"keywords": ["urgent"]})
        await channels.save("webhook:ci", "webhook", {"path": "/ci2"}, {})
        assert await channels.remove("nothing") is False
    async with open_store() as store:
        stored = await store.connected_channels.all()
        # In the order they were (last) connected: the replaced one comes last.
        assert [c.name for c in stored] == ["email:work", "webhook:ci"]
        by_name = {c.name: c for c in stored}
        assert by_name["webhook:ci"].settings == {"path": "/ci2"}
        assert by_name["email:work"].filter == {"keywords": ["urgent"]}
        assert by_name["email:work"].kind == "email"
        assert datetime.fromisoformat(by_name["email:work"].connected_at).tzinfo is not None
        assert await store.connected_channels.remove("email:work") is True
        assert [c.name for c in await store.connected_channels.all()] == ["webhook:ci"]


# --- rows edited by hand -------------------------------------------------------------------------


async def test_a_hand_edited_connected_channel_is_reported_by_name(
    open_store: OpenStore, write_raw: WriteRaw
) -> None:
    async with open_store() as store:
        await store.connected_channels.save("webhook:good", "webhook", {}, {})
    await write_raw(
        "INSERT INTO connected_channels VALUES (%s, %s, %s, %s, %s)",
        ("webhook:bad", "webhook", "[1]", "{}", "2025-01-01T00:00:00+00:00"),
    )
    async with open_store() as store:
        with pytest.raises(StoreError, match=unreadable("connected channel webhook:bad")):
            await store.connected_channels.all()
        # Left as it was: removing it by name is the way out.
        assert await store.connected_channels.remove("webhook:bad")
        assert [c.name for c in await store.connected_channels.all()] == ["webhook:good"]


async def test_a_hand_edited_confirmation_token_is_reported_by_its_tool(
    open_store: OpenStore, write_raw: WriteRaw
) -> None:
    async with open_store():
        pass
    await write_raw(
        "INSERT INTO confirmations (token, tool, arguments_hash, field_hashes, preview, "
        "issued_at, expires_at, state) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        ("tok", "send_email", "h", "{not json", "{}", "x", "y", "issued"),
    )
    async with open_store() as store:
        with pytest.raises(StoreError, match=unreadable("confirmation token of send_email")):
            await store.confirmations.get("tok")
        with pytest.raises(StoreError, match=unreadable("confirmation token of send_email")):
            await store.confirmations.use("tok", only_once, T0)
    async with open_store() as store:
        assert await store.confirmations.fail("tok", "checked by hand")  # the row is still there


async def test_a_hand_edited_audit_record_is_reported_by_its_number(
    open_store: OpenStore, write_raw: WriteRaw
) -> None:
    async with open_store() as store:
        audit(store, 1)
    await write_raw(
        "INSERT INTO audit (ts, session, tool, call_id, status, duration_ms, data) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s)",
        ("2025-01-01T00:00:02+00:00", "main", "send", "call_2", "ok", 1.0, "not json"),
    )
    async with open_store() as store:
        [good] = await store.audit_log.rows(limit=1)
        with pytest.raises(StoreError, match=unreadable(f"audit record #{good.seq + 1}")):
            await store.audit_log.rows()
        assert [r.call_id for r in await store.audit_log.rows(tool="send", limit=1)] == ["call_1"]


# --- a closed store ------------------------------------------------------------------------------


async def test_a_closed_store_refuses_use_of_these_repositories(open_store: OpenStore) -> None:
    async with open_store() as store:
        pass
    with pytest.raises(StoreError, match="is closed"):
        await store.idempotency_keys.claim("send", "k", "h", T0)
    with pytest.raises(StoreError, match="is closed"):
        await store.confirmations.get("tok")
    with pytest.raises(StoreError, match="is closed"):
        audit(store, 1)
    with pytest.raises(StoreError, match="is closed"):
        await store.channel_cursors.put("email:work", "uid", "1")
    with pytest.raises(StoreError, match="is closed"):
        await store.connected_channels.all()
