"""Role leases on a real PostgreSQL (wakeful.store.postgres.roles): of workers racing for one role
exactly one holds it; a holder that stops renewing past its lease (frozen) loses it to another
and its renewal says so; a release hands the role over at once; epochs only grow. A cursor write
under a role lease that expired or moved is refused in its own transaction, nothing written;
messages handed over to a role are kept once each, read oldest first, and dropped when done with
or too old."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

from wakeful.core.channel import RoleLease, RoleLost
from wakeful.errors import UserError

pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")

from wakeful.store.postgres import PostgresStore
from wakeful.store.postgres.roles import PostgresRoleLeases

pytestmark = pytest.mark.anyio

ROLE = "channel:email:work"


@asynccontextmanager
async def stores(url: str, count: int) -> AsyncIterator[list[PostgresStore]]:
    """`count` stores on one database, each with its own pool, as separate workers have."""
    async with AsyncExitStack() as stack:
        opened = [
            await stack.enter_async_context(await PostgresStore.open(url, pool_size=2))
            for _ in range(count)
        ]
        yield opened


async def take_into(
    taken: list[RoleLease | None], index: int, roles: PostgresRoleLeases, role: str
) -> None:
    taken[index] = await roles.take(role)


async def test_of_three_workers_racing_for_a_role_exactly_one_takes_it(postgres_url: str) -> None:
    async with stores(postgres_url, 3) as opened:
        roles = [s.role_leases(f"w{i}", lease_seconds=30) for i, s in enumerate(opened)]
        for round_number in range(10):
            role = f"{ROLE}-{round_number}"
            taken: list[RoleLease | None] = [None] * len(roles)
            async with anyio.create_task_group() as tg:
                for index in range(len(roles)):
                    tg.start_soon(take_into, taken, index, roles[index], role)
            winners = [lease for lease in taken if lease is not None]
            assert len(winners) == 1, taken
            holder = await roles[0].holder(role)
            assert holder is not None and holder.owner == winners[0].owner
            assert holder.epoch == winners[0].epoch == 1
            # The losers still cannot take it while it is held.
            for other in roles:
                if other.owner != winners[0].owner:
                    assert await other.take(role) is None


async def test_a_holder_frozen_past_its_lease_loses_the_role_and_its_renewal_says_so(
    postgres_url: str,
) -> None:
    async with stores(postgres_url, 2) as (first, second):
        frozen = first.role_leases("frozen", lease_seconds=0.5)
        standby = second.role_leases("standby", lease_seconds=0.5)
        lease = await frozen.take(ROLE)
        assert lease is not None
        assert await standby.take(ROLE) is None
        renewed = await frozen.renew(lease)
        assert renewed is not None and renewed.expires_at > lease.expires_at
        await anyio.sleep(0.8)  # the holder does nothing past its lease
        taken = await standby.take(ROLE)
        assert taken is not None and taken.epoch == lease.epoch + 1
        assert await frozen.renew(lease) is None
        assert await frozen.release(lease) is False  # nothing of the new holder's is undone
        holder = await frozen.holder(ROLE)
        assert holder is not None and holder.owner == "standby"
        assert 0 < holder.expires_in_s <= 0.5


async def test_an_expired_role_that_nobody_took_is_not_renewed(postgres_url: str) -> None:
    async with stores(postgres_url, 1) as (store,):
        roles = store.role_leases("slow", lease_seconds=0.3)
        lease = await roles.take(ROLE)
        assert lease is not None
        await anyio.sleep(0.5)
        assert await roles.renew(lease) is None
        assert await roles.holder(ROLE) is None


async def test_a_release_hands_the_role_over_at_once(postgres_url: str) -> None:
    async with stores(postgres_url, 2) as (first, second):
        holder_roles = first.role_leases("holder", lease_seconds=60)
        waiting = second.role_leases("waiting", lease_seconds=60)
        lease = await holder_roles.take(ROLE)
        assert lease is not None
        assert await waiting.take(ROLE) is None
        assert await holder_roles.release(lease) is True
        assert await waiting.holder(ROLE) is None
        taken = await waiting.take(ROLE)
        assert taken is not None and taken.epoch == lease.epoch + 1
        assert await holder_roles.renew(lease) is None


async def test_a_restarted_worker_takes_back_its_own_role_at_once(postgres_url: str) -> None:
    # A worker restarted under the same name: its earlier run's role is not waited out.
    async with stores(postgres_url, 2) as (first, second):
        earlier = await first.role_leases("w1", lease_seconds=60).take(ROLE)
        assert earlier is not None
        again = await second.role_leases("w1", lease_seconds=60).take(ROLE)
        assert again is not None and again.epoch == earlier.epoch + 1
        assert await first.role_leases("w1", lease_seconds=60).renew(earlier) is None


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan")])
async def test_a_lease_time_of_zero_or_less_is_refused(postgres_url: str, seconds: float) -> None:
    async with stores(postgres_url, 1) as (store,):
        with pytest.raises(UserError, match="lease_seconds of role leases must be more than 0"):
            store.role_leases("w", lease_seconds=seconds)
        assert isinstance(store.role_leases("w", lease_seconds=1), PostgresRoleLeases)


CHANNEL = "email:work"


async def test_a_cursor_write_after_the_role_lease_expired_is_refused_and_writes_nothing(
    postgres_url: str,
) -> None:
    async with stores(postgres_url, 1) as (store,):
        lease = await store.role_leases("frozen", lease_seconds=0.4).take(ROLE)
        assert lease is not None
        held = store.channel_cursors.held_by(lease)
        await held.put_many(CHANNEL, {"uidvalidity": "7", "last_uid": "10"})
        await anyio.sleep(0.6)  # past the lease: nobody took the role, but it expired
        with pytest.raises(RoleLost, match=r"no longer holds the role 'channel:email:work'"):
            await held.put(CHANNEL, "last_uid", "11")
        assert await store.channel_cursors.get(CHANNEL, "last_uid") == "10"


async def test_a_cursor_write_of_a_holder_whose_role_moved_is_refused_naming_the_new_holder(
    postgres_url: str,
) -> None:
    async with stores(postgres_url, 2) as (first, second):
        old = await first.role_leases("frozen", lease_seconds=0.3).take(ROLE)
        assert old is not None
        await anyio.sleep(0.5)
        new = await second.role_leases("standby", lease_seconds=30).take(ROLE)
        assert new is not None
        await second.channel_cursors.held_by(new).put(CHANNEL, "last_uid", "20")
        with pytest.raises(RoleLost, match=r"worker standby \(epoch 2\) holds it now"):
            await first.channel_cursors.held_by(old).put_many(CHANNEL, {"last_uid": "12"})
        assert await second.channel_cursors.get(CHANNEL, "last_uid") == "20"
        # The shared (unfenced) cursors of other channels are written as before.
        await first.channel_cursors.put("webhook:gh", "seen", "1")
        assert await second.channel_cursors.get("webhook:gh", "seen") == "1"


async def test_messages_handed_over_to_a_role_are_kept_once_each_oldest_first(
    postgres_url: str,
) -> None:
    async with stores(postgres_url, 2) as (first, second):
        sender = first.role_leases("w1", lease_seconds=30)
        holder = second.role_leases("w2", lease_seconds=30)
        for message_id in ("msg_a", "msg_b", "msg_a", "msg_c"):
            await sender.hand_over(ROLE, message_id)
        await sender.hand_over("channel:xmpp:me", "msg_x")
        assert await holder.handed_over(ROLE, within_s=60, limit=10) == ["msg_a", "msg_b", "msg_c"]
        assert await holder.handed_over(ROLE, within_s=60, limit=2) == ["msg_a", "msg_b"]
        await holder.done_with(ROLE, "msg_b")
        assert await holder.handed_over(ROLE, within_s=60, limit=10) == ["msg_a", "msg_c"]
        # A hand-over older than the look-back is dropped for good, never sent.
        await anyio.sleep(0.3)
        await sender.hand_over(ROLE, "msg_d")
        assert await holder.handed_over(ROLE, within_s=0.2, limit=10) == ["msg_d"]
        assert await holder.handed_over(ROLE, within_s=60, limit=10) == ["msg_d"]
        assert await holder.handed_over("channel:xmpp:me", within_s=60, limit=10) == ["msg_x"]


async def test_a_take_behind_a_frozen_cursor_write_gives_up_at_once_and_takes_it_once_freed(
    postgres_url: str,
) -> None:
    # A holder frozen inside a cursor write keeps the role's row locked (FOR SHARE) until the
    # server ends its transaction. A take meanwhile must answer "not now" soon, not wait there
    # (the runtime would cancel it and drop its connection).
    import psycopg

    from wakeful.store.postgres.roles import check_role

    async with stores(postgres_url, 2) as (first, second):
        lease = await first.role_leases("frozen", lease_seconds=0.5).take(ROLE)
        assert lease is not None
        standby = second.role_leases("standby", lease_seconds=30)
        async with await psycopg.AsyncConnection.connect(postgres_url) as frozen:
            async with frozen.transaction():
                await check_role(frozen, lease, "a cursor")  # and then nothing: frozen
                await anyio.sleep(0.7)  # past the lease
                with anyio.fail_after(2.5):
                    assert await standby.take(ROLE) is None
            # The write's transaction ended: the expired role is taken at the next attempt.
            taken = await standby.take(ROLE)
            assert taken is not None and taken.epoch == lease.epoch + 1
