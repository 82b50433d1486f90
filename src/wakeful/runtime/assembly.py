"""Building a running runtime's parts from its settings: the store, the services tools use (the
task manager among them), the idle-eviction countdowns, the timers, the event channels, and the
sandbox check.

Each part is entered on the runtime's exit stack or started in its task group, so the runtime
leaves them in reverse order; the runtime calls these in the order its start needs (see
`Runtime._open`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from ..errors import UserError
from ..services import Emit, Outbox, Services
from ..tools.tasks import TaskManager
from .idle_eviction import IdleEviction
from .recovery import record_stopped_task

if TYPE_CHECKING:
    from ..agent.router import Decision
    from ..channels.timers import TimerService
    from ..core.runtime_store import RuntimeStore
    from ..events import Event
    from ..store.postgres import PostgresStore
    from .channels import RuntimeChannels
    from .inbox import RuntimeInbox
    from .settings import RuntimeSettings
    from .worker import SessionCluster

__all__ = [
    "check_sandbox",
    "load_timers",
    "new_services",
    "open_store",
    "start_channels",
    "start_eviction",
]


async def open_store(settings: RuntimeSettings, stack: AsyncExitStack) -> RuntimeStore | None:
    """The store `settings` names (None without one): the SQLite file at `store_path`, or the
    PostgreSQL database at `store_url`; closed when `stack` unwinds, even while cancelled."""
    if settings.store_url is not None:
        return await open_postgres_store(settings.store_url, stack)
    if settings.store_path is None:
        return None
    from ..store.sqlite import Store

    # Store.open makes the folder itself, with an error that says why it cannot.
    store = await Store.open(settings.store_path, synchronous=settings.store_synchronous)

    async def close_store() -> None:
        with anyio.CancelScope(shield=True):
            await store.close()

    stack.push_async_callback(close_store)
    return store


async def open_postgres_store(url: str, stack: AsyncExitStack) -> RuntimeStore:
    """The PostgreSQL store at `url`, its writer running until `stack` unwinds; then every
    queued write is committed (shielded from a cancellation) before the pool closes.

    Without psycopg (the `postgres` extra) the start fails with a UserError that says how to
    install it; a server that cannot be reached, with the store's StoreError."""
    try:
        from ..store.postgres import PostgresStore
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("psycopg"):
            raise
        raise UserError(
            f"A store on PostgreSQL needs psycopg, which is not installed ({exc.name} is "
            "missing). Install it with: pip install 'wakeful[postgres]'."
        ) from exc
    store = await PostgresStore.open(url)
    return await stack.enter_async_context(_running(store))


@asynccontextmanager
async def _running(store: PostgresStore) -> AsyncIterator[PostgresStore]:
    """`store` with its writer running (its own task group); closed shielded on the way out, so
    a cancelled runtime still commits what it queued, then the writer's group ends."""
    async with store:
        try:
            yield store
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()


def new_services(
    settings: RuntimeSettings,
    tg: TaskGroup,
    store: RuntimeStore | None,
    *,
    emit: Emit,
    submit_task_result: Callable[[Event], Awaitable[Decision]],
    outbox: Outbox,
) -> Services:
    """The services every tool call gets, with a task manager whose tasks run in `tg`, report
    through `submit_task_result` and, with a store, are saved as they change; with a store, the
    outbox keeps its messages there (unless it was given a repository of its own)."""
    tasks = TaskManager(
        tg,
        submit_task_result,
        on_change=store.save_task_nowait if store is not None else None,
        on_stopped=partial(record_stopped_task, store) if store is not None else None,
        progress_interval=settings.progress_interval,
    )
    if store is not None:
        # With a store, messages to the user (and their read state) survive restarts.
        outbox.keep_messages_in(store.messages)
    return Services(
        tasks=tasks,
        emit=emit,
        outbox=outbox,
        store=store,
        workdir=settings.workdir,
        settings=settings.settings_by_class(),
    )


async def start_eviction(
    settings: RuntimeSettings,
    tg: TaskGroup,
    store: RuntimeStore | None,
    evict: Callable[[str], bool],
) -> IdleEviction | None:
    """The countdowns that unload idle sessions through `evict`, running in `tg`; None without
    a store (an unloaded session's state would be lost) or with eviction off."""
    if store is None or settings.evict_idle_after_seconds is None:
        return None
    eviction = IdleEviction(settings.evict_idle_after_seconds, evict, clock=settings.clock)
    await tg.start(eviction.run)
    return eviction


async def check_sandbox(settings: RuntimeSettings) -> None:
    """Fail now, not at the first command, where the sandbox asked for cannot be had, and warn
    loudly (once) where commands would run unconfined; see `run_shell`."""
    from ..safety.sandbox import Sandbox

    workspace = settings.workdir or Path.cwd()
    await anyio.to_thread.run_sync(Sandbox, settings.sandbox_settings(), workspace)  # probes bwrap


async def load_timers(
    settings: RuntimeSettings,
    store: RuntimeStore | None,
    services: Services,
    hand_over: Callable[[Event], Awaitable[Decision]],
) -> TimerService | None:
    """The timer service with every stored timer loaded, not yet firing (None with timers off).

    The service stores each fire itself, with the timer's advance (one transaction), and hands
    it over stored through `hand_over`. Loaded before recovery, so recovered sessions' timer
    tools see every timer; the runtime starts firing only after recovery has queued the pending
    events, so a fire cannot reach a session twice (once fired, once recovered).
    """
    if not settings.with_timers:
        return None
    from ..channels.timers import TimerService

    # A store other workers share: claim every few seconds too, so timers set through a worker
    # that has gone still fire.
    timers = TimerService(
        store,
        hand_over,
        clock=settings.clock,
        poll_seconds=5.0 if settings.store_url is not None else None,
    )
    services.timers = timers
    await timers.load()
    return timers


async def start_channels(
    settings: RuntimeSettings,
    tg: TaskGroup,
    inbox: RuntimeInbox,
    store: RuntimeStore | None,
    services: Services,
    *,
    cluster: SessionCluster | None = None,
) -> RuntimeChannels:
    """The runtime's channels, each supervised in `tg`: the configured ones validated (a bad
    one fails the start, naming its table and field) and started, then those the agent
    connected in an earlier run. The channel tools find them in `services.state`.

    As a worker of a `cluster` (started, on a PostgreSQL store), a channel that pulls from its
    source runs only while this worker holds its role, with the cluster's lease time (see
    :mod:`.channels`)."""
    from ..toolkits.collaboration.notify import ImSender
    from ..toolkits.triggers.channels import ChannelControl
    from .channels import RuntimeChannels

    roles = None
    if cluster is not None and cluster.ownership is not None:
        from ..store.postgres import PostgresStore

        if isinstance(store, PostgresStore):
            roles = store.role_leases(
                cluster.ownership.worker_id, lease_seconds=cluster.lease_seconds
            )

    channels = RuntimeChannels(
        tg=tg,
        inbox=inbox,
        store=store,
        workspace=settings.workdir or Path.cwd(),
        kinds=settings.channel_kinds,
        services=services,
        reads=services.outbox,
        roles=roles,
    )
    services.state[ChannelControl] = channels
    services.state[ImSender] = channels
    await channels.start(settings.channels)
    return channels
