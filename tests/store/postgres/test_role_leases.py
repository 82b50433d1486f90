"""Role leases on a real PostgreSQL (wakeful.store.postgres.roles): of workers racing for one role
exactly one holds it; a holder that stops renewing past its lease (frozen) loses it to another
and its renewal says so; a release hands the role over at once; epochs only grow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

from wakeful.core.channel import RoleLease
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
