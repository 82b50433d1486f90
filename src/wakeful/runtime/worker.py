"""A worker's ownership of sessions on a shared PostgreSQL store: which sessions this process runs.

Several ``wakeful`` processes (workers) share one PostgreSQL store. Each session is run by one
worker at a time, the one holding its lease (:mod:`wakeful.store.postgres.leases`, whose docs
list the failure modes). :class:`SessionOwnership` is that coordination for one process, apart
from what a session does:

- it registers the worker and renews its leases in the background; a lease that is lost (taken
  over after a freeze, expired during a partition) is reported to the handler at once, which
  drops the session without writing anything more (the fence would refuse it anyway);
- it listens for wake-ups (``LISTEN``): an event stored for a session held here wakes the
  handler for it; one for a session held nowhere, a missed notification (reconnection) and a
  periodic poll start a claim pass, which takes unowned sessions with pending events and the
  sessions of dead workers (``FOR UPDATE SKIP LOCKED``, a bounded batch at a time), handing each
  to the handler with its fenced store view;
- :meth:`SessionOwnership.route` decides for an event that arrived on this worker (a webhook,
  a channel) whether this worker runs its session: held here, held by another live worker (the
  event is stored and that worker woken by its notification), or taken now;
- sessions idle for a while are released, so that the load spreads over the workers again;
- stopping releases every lease, so other workers take the sessions over at once rather than
  after the lease time.

The handler's callbacks are called on the event loop and must return quickly: hand the session
on to a stream or set a flag. Every write for a session goes through the
:class:`~wakeful.store.postgres.FencedStore` handed with it, so a session whose lease is gone can
write nothing even if the handler has not yet noticed.

:class:`SessionCluster` is the handler a runtime uses (``rt.cluster = SessionCluster()``): it
recovers each session it takes over (through the fenced view), hands it the pending events it
was not handed yet, and drops it when its lease is lost. The SQLite store, one process, needs
none of this and stays the default.

Every write of a session goes through its fenced view: its trajectory and event marks, and,
through :meth:`SessionCluster.fenced` (a :data:`~wakeful.core.session_writes.SessionWrites`
the runtime gives its outbox, task manager, queue of requests to people and subagents), its
messages to the user, task records, requests to a person and its children's records. A session
lost here keeps its last view for those, so a write still under way for it is refused
(:class:`~wakeful.store.postgres.LeaseLost`), never made unfenced. What a previous owner left of
a session apart from its trajectory (its open requests to a person, its children) is taken up by
the worker that takes the session over, and dropped by the one that loses it, so each is
followed by one worker: a running child goes with its own session (its follower looks at it), an
ended one and a request with their session.

Known gaps:

- A write refused inside a tool (a message, a request) reaches the model as the tool's error
  (the tool boundary catches it); the session stops at its next trajectory write, refused too.
- A background task cut off by the runtime's stop is recorded through the shared store (the
  runtime's ``on_stopped``), and events a session makes for others (a task's result, a child's
  result for its parent, a person's answer) are stored unfenced: they are handed to their
  session's owner, and the last two have ids that make a repeat a duplicate.
- Taking up one session's requests reads every unsettled request (the repository has no
  per-session query).

The limits on running children (``subagents.max_children``, ``max_tree``) hold across workers:
a spawn's record is stored by a write that counts the parent's and the tree's running children
in its own transaction, under advisory locks on that parent and tree, and refuses a child over a
limit (see :mod:`wakeful.store.postgres.subagents`).

A session a clean stop released with an open request to a person or a child running (or a result
not handed over) but no pending event is claimed by the next claim pass anywhere, like one with
pending events (:meth:`~wakeful.store.postgres.Worker.claim`), so a request's default still
comes on time. The last views of lost sessions are bounded (`LOST_VIEWS_KEPT`).
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ..agent.router import Decision, Strategy
from ..errors import StoreError, UserError
from .recovery import lost_task_alert

if TYPE_CHECKING:
    from ..agent.session import AgentSession
    from ..core.runtime_store import RuntimeStore
    from ..events import Event
    from ..messages import Message
    from ..store.postgres import FencedStore, Lease, LostLease, PostgresStore, Worker
    from .loaded_sessions import LoadedSessions

__all__ = [
    "DEFAULT_CLAIM_BATCH",
    "DEFAULT_IDLE_RELEASE_S",
    "DEFAULT_LEASE_S",
    "Route",
    "SessionCluster",
    "SessionHandler",
    "SessionOwnership",
]

log = logging.getLogger(__name__)

# How long a lease lasts unless renewed (renewed every third of it): a dead worker's sessions
# move after about this long.
DEFAULT_LEASE_S: Final = 15.0
# How many sessions one claim takes at a time (a pass repeats while batches come back full).
DEFAULT_CLAIM_BATCH: Final = 10
# A session with no activity for this long is released for any worker to take.
DEFAULT_IDLE_RELEASE_S: Final = 300.0
# How long stopping may take to release the leases before the process ends anyway (they then
# expire after the lease time).
STOP_TIMEOUT_S: Final = 5.0
# How many last fenced views of sessions owned here a worker keeps, the owned ones counted: a
# session lost keeps its view so that a write still under way for it is refused, never made
# unfenced; past that the views of the sessions taken longest ago and lost since are dropped,
# long after any write of theirs ended.
LOST_VIEWS_KEPT: Final = 10_000


class SessionHandler(Protocol):
    """What a worker does with the sessions it owns (the runtime, or a test's consumer).

    Every method is called on the event loop and must return quickly."""

    def claimed(self, session: str, store: FencedStore) -> None:
        """`session` is owned here from now on (a new lease): recover it through `store` (its
        previous owner may have died mid-turn) and handle its pending events."""

    def woken(self, session: str, store: FencedStore) -> None:
        """Events were stored for `session`, owned here, perhaps by another worker: handle its
        pending events (those already handled are recognised by their ids)."""

    def lost(self, session: str) -> None:
        """`session` is no longer owned here (its lease was lost, or it was released while
        idle): drop it and write nothing more for it."""

    def busy(self, session: str) -> bool:
        """Whether `session` is working now (an idle one may be released)."""


class Route(enum.Enum):
    """Where an event that arrived on this worker is handled (:meth:`SessionOwnership.route`);
    the event is stored already in each case."""

    HERE = "here"
    """The session is owned here: hand it the event (its store: :meth:`SessionOwnership.view`)."""
    TAKEN = "taken"
    """The session was owned by nobody and is owned here now: the handler's ``claimed`` was
    called and picks the event up from the store with the session's other pending events."""
    ELSEWHERE = "elsewhere"
    """Another live worker owns the session; the notification sent with the stored event wakes
    it."""


class SessionOwnership:
    """The sessions one worker owns on a shared PostgreSQL store; see the module docs.

    Run :meth:`run` in the worker's task group (``await tg.start(ownership.run)``); cancelling it
    stops the worker and releases its leases.
    """

    def __init__(
        self,
        store: PostgresStore,
        handler: SessionHandler,
        *,
        lease_seconds: float = DEFAULT_LEASE_S,
        name: str | None = None,
        claim_batch: int = DEFAULT_CLAIM_BATCH,
        max_sessions: int | None = None,
        poll_every_s: float | None = None,
        idle_release_s: float | None = DEFAULT_IDLE_RELEASE_S,
    ) -> None:
        if claim_batch < 1:
            raise UserError(f"claim_batch must be at least 1, got {claim_batch}.")
        if max_sessions is not None and max_sessions < 1:
            raise UserError(
                f"max_sessions must be at least 1, got {max_sessions}; leave it out for no limit."
            )
        if idle_release_s is not None and not idle_release_s > 0:
            raise UserError(
                f"idle_release_s must be more than 0, got {idle_release_s}; leave it out (None) "
                "to keep idle sessions."
            )
        self._store = store
        self._handler = handler
        self._lease_seconds = lease_seconds
        self._name = name
        self._claim_batch = claim_batch
        self._max_sessions = math.inf if max_sessions is None else max_sessions
        # Polling is what finds a dead worker's sessions (their expiry sends no notification):
        # often enough that they move within about a second of expiring.
        self._poll_every_s = min(1.0, lease_seconds / 4) if poll_every_s is None else poll_every_s
        self._idle_release_s = idle_release_s
        self._worker: Worker | None = None
        self._views: dict[str, FencedStore] = {}
        self._last_active: dict[str, float] = {}
        # Sessions being released now, and those of them woken meanwhile (claimed again after).
        self._releasing: set[str] = set()
        self._woken_while_releasing = False
        self._claim_wanted = anyio.Event()
        self.claim_passes = 0

    @property
    def worker_id(self) -> str:
        """The registered worker's id (once :meth:`run` has started)."""
        return self._running().id

    @property
    def sessions(self) -> list[str]:
        """The sessions owned here now, sorted."""
        return sorted(self._views)

    def view(self, session: str) -> FencedStore | None:
        """The fenced store of `session` if it is owned here, else None."""
        return self._views.get(session)

    def touch(self, session: str) -> None:
        """Note activity on `session` (it is not released while active)."""
        if session in self._views:
            self._last_active[session] = time.monotonic()

    def _running(self) -> Worker:
        if self._worker is None:
            raise UserError(
                "This SessionOwnership is not running: start it first with "
                "`await task_group.start(ownership.run)`."
            )
        return self._worker

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Register the worker, then keep its leases, listen and claim until cancelled; started
        once it listens (an event stored from then on wakes it). On cancellation the worker's
        leases are released and it is marked stopped."""
        worker = await self._store.register_worker(
            lease_seconds=self._lease_seconds, name=self._name
        )
        self._worker = worker
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(worker.keep_leases, self._leases_lost)
                listener = self._store.wakeup_listener(self._on_wake, self._on_missed)
                await tg.start(listener.run)
                tg.start_soon(self._claim_loop)
                if self._idle_release_s is not None:
                    tg.start_soon(self._release_idle_loop, self._idle_release_s)
                task_status.started()
        finally:
            await self._stop(worker)

    async def _stop(self, worker: Worker) -> None:
        sessions = list(self._views)
        self._views.clear()
        self._last_active.clear()
        for session in sessions:
            self._handler.lost(session)
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT_S):
            try:
                await worker.stop()
            except StoreError as exc:
                log.warning(
                    "Worker %s could not release its %d session(s) on stopping (%s); other "
                    "workers take them once their leases expire.",
                    worker.id,
                    len(sessions),
                    exc,
                )

    def _own(self, lease: Lease) -> FencedStore:
        view = self._store.fenced(lease)
        self._views[lease.session] = view
        self._last_active[lease.session] = time.monotonic()
        return view

    def _disown(self, session: str) -> bool:
        self._last_active.pop(session, None)
        return self._views.pop(session, None) is not None

    def _leases_lost(self, lost: Sequence[LostLease]) -> None:
        for each in lost:
            session = each.lease.session
            # A lease renewed or taken again since (a later epoch) is not the one lost.
            view = self._views.get(session)
            if view is None or view.lease.epoch != each.lease.epoch:
                continue
            log.warning(
                "Worker %s lost session %r: %s; dropping it.", each.lease.owner, session, each.why
            )
            self._disown(session)
            self._handler.lost(session)
        # Lost sessions may have pending events nobody runs now (an expiry during a partition).
        self._claim_wanted.set()

    def _on_wake(self, session: str, owner: str | None) -> None:
        view = self._views.get(session)
        if view is not None:
            self._last_active[session] = time.monotonic()
            self._handler.woken(session, view)
            return
        if session in self._releasing:
            self._woken_while_releasing = True
        elif owner is not None and owner != self._running().id:
            return  # its live owner is woken by this notification; nothing to claim
        self._claim_wanted.set()

    def _on_missed(self) -> None:
        for session, view in list(self._views.items()):
            self._handler.woken(session, view)
        self._claim_wanted.set()

    async def _claim_loop(self) -> None:
        while True:
            with anyio.move_on_after(self._poll_every_s):
                await self._claim_wanted.wait()
            self._claim_wanted = anyio.Event()
            try:
                await self.claim_pass()
            except StoreError as exc:
                log.warning("Worker %s could not claim sessions: %s", self._running().id, exc)

    async def claim_pass(self) -> int:
        """Claim sessions nobody runs (with work waiting, or whose lease expired), a batch at a
        time, up to `max_sessions` owned; hand each to the handler. Returns how many. The first
        batch gives new sessions with work their lease rows; the later ones only claim."""
        worker = self._running()
        self.claim_passes += 1
        taken = 0
        while True:
            room = self._max_sessions - len(self._views)
            if room < 1:
                return taken
            limit = int(min(self._claim_batch, room))
            leases = await worker.claim(limit, add_rows=taken == 0)
            for lease in leases:
                self._handler.claimed(lease.session, self._own(lease))
            taken += len(leases)
            if len(leases) < limit:
                return taken

    async def route(self, session: str) -> Route:
        """Where an event for `session`, stored already on this worker, is handled (see
        :class:`Route`); a session owned by nobody is taken here."""
        if session in self._views:
            self._last_active[session] = time.monotonic()
            return Route.HERE
        lease = await self._running().acquire(session)
        if lease is None:
            return Route.ELSEWHERE
        held = self._views.get(session)
        if held is not None and held.lease.epoch == lease.epoch:
            return Route.HERE  # taken meanwhile by a claim pass of this worker, this lease
        # A lease newer than the one a claim pass of this worker took meanwhile (the writes
        # under that one are refused now): the session is taken over again under this one.
        self._handler.claimed(session, self._own(lease))
        return Route.TAKEN

    async def release(self, session: str) -> bool:
        """Give `session` up (the handler's ``lost`` is called first) so any worker may take it
        at once; False when it was not owned here."""
        view = self._views.get(session)
        if view is None:
            return False
        self._disown(session)
        self._handler.lost(session)
        self._releasing.add(session)
        try:
            await self._running().release(view.lease)
        finally:
            self._releasing.discard(session)
        return True

    async def _release_idle_loop(self, idle_s: float) -> None:
        while True:
            await anyio.sleep(min(idle_s / 2, 30.0))
            cutoff = time.monotonic() - idle_s
            idle = [
                session
                for session, at in list(self._last_active.items())
                if at <= cutoff and not self._handler.busy(session)
            ]
            self._woken_while_releasing = False
            for session in idle:
                try:
                    await self.release(session)
                except StoreError as exc:
                    # Not released: it expires after the lease time, as if this worker died.
                    log.warning(
                        "Worker %s could not release %r: %s", self._running().id, session, exc
                    )
            if self._woken_while_releasing:
                # An event came for a session while its release was in flight: its notification
                # found no owner to wake, so claim it back (here or anywhere).
                self._claim_wanted.set()


async def _nothing_to_take_up(session: str) -> None:
    """A runtime without requests to people or children to take up with a session."""


async def _sessions_with_work(store: PostgresStore) -> list[str]:
    """The sessions left with work that no claim looks for (without a pending event): a
    cut-off trajectory, a running task, an open request to a person or an outcome not handed
    over, a child running (its own session) or with a result not handed over (its parent's)."""
    running = {r.session for r in await store.task_records.find() if r.state == "running"}
    asked = {r.session for r in await store.human_requests.unsettled()}
    children = {
        r.id if r.status == "running" else r.parent for r in await store.subagents.unsettled()
    }
    resume = set(await store.trajectories.sessions_to_resume())
    return sorted(resume | running | asked | children)


class _FencedWrites:
    """The writes a session's trajectory makes (`TrajectoryStore`), through its fenced view."""

    def __init__(self, view: FencedStore) -> None:
        self._view = view

    async def append_messages(self, session: str, messages: Sequence[Message]) -> None:
        await self._view.trajectories.append(session, messages)

    async def mark_events(self, ids: Sequence[str], status: str) -> None:
        await self._view.events.mark(ids, status)


class SessionCluster:
    """A runtime's part in a cluster of workers sharing one PostgreSQL store: it runs the
    sessions this worker owns (:class:`SessionOwnership`), and only those.

    Set it on a runtime before entering it (``rt.cluster = SessionCluster()``, with
    ``store_url``). On entry, instead of recovering every session, the runtime registers as a
    worker and takes over the sessions nobody runs, recovering each through its fenced store
    view: its trajectory repaired, the tasks its previous owner left running reported lost, its
    pending events handed to it (those already in its trajectory only marked consumed). An event
    for a session another live worker owns is stored and not handed here (its owner is woken);
    one for a session nobody owns is taken over here. A session whose lease is lost is dropped
    at once (its loop cancelled; any write it still attempts is refused by the fence).
    """

    def __init__(
        self,
        *,
        lease_seconds: float = DEFAULT_LEASE_S,
        name: str | None = None,
        claim_batch: int = DEFAULT_CLAIM_BATCH,
        max_sessions: int | None = None,
        idle_release_s: float | None = DEFAULT_IDLE_RELEASE_S,
    ) -> None:
        self._lease_seconds = lease_seconds
        self._name = name
        self._claim_batch = claim_batch
        self._max_sessions = max_sessions
        self._idle_release_s = idle_release_s
        self.ownership: SessionOwnership | None = None
        self._tg: TaskGroup | None = None
        self._sessions: LoadedSessions | None = None
        self._submit: Callable[[Event], Awaitable[Decision]] | None = None
        self._forget: Callable[[str], None] | None = None
        self._has_tasks: Callable[[str], bool] = lambda session: False
        self._take_up: Callable[[str], Awaitable[None]] = _nothing_to_take_up
        self._saw: Callable[[Event], None] = lambda event: None
        # The latest view of each session this worker owned, kept after the session is lost:
        # a write for it still under way here goes through it and is refused (see `fenced`).
        self._last_views: dict[str, FencedStore] = {}
        # The events handed to each owned session under its current lease: an event stored
        # here is handed directly and also wakes this worker; it is not handed twice.
        self._handed: dict[str, set[str]] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._in_flight = 0
        # Take-overs spawned and not yet over, by session: an event routed to such a session is
        # handed by the take-over (or a catch-up after it), never directly as well.
        self._taking_over: dict[str, int] = {}
        self._settled = anyio.Event()
        self._on_settled: Callable[[], None] = lambda: None

    async def start(
        self,
        tg: TaskGroup,
        store: RuntimeStore,
        sessions: LoadedSessions,
        *,
        submit: Callable[[Event], Awaitable[Decision]],
        forget: Callable[[str], None],
        has_tasks: Callable[[str], bool] = lambda session: False,
        settled: Callable[[], None] = lambda: None,
        take_up: Callable[[str], Awaitable[None]] | None = None,
        saw: Callable[[Event], None] = lambda event: None,
    ) -> None:
        """Register, take over the sessions nobody runs (recovered before this returns), and
        keep owning, claiming and releasing sessions in `tg` until it ends.

        `submit` stores and hands an event (the lost-task alerts); `forget(session)` drops a
        session no longer owned here, writing nothing; `has_tasks(session)` says whether it has
        work under way here (tasks, children, an answer awaited: such a session is never
        released as idle); `settled()` is called whenever the last take-over or catch-up under
        way ends (the runtime's idle check waits for them: see :attr:`settling`);
        `take_up(session)` takes up, as each session is taken over and before it is loaded,
        what a previous owner left of it that the runtime keeps apart from its sessions (its
        open requests to a person, its children), so that each is taken up by one worker;
        `saw(event)` is told of each event handed to a session from the store (the user's
        activity: where the session's replies go, as for an event that arrived here)."""
        from ..store.postgres import PostgresStore

        if not isinstance(store, PostgresStore):
            raise UserError(
                "Workers share a PostgreSQL store, and this runtime's store is a SQLite file. "
                "Give the runtime store_url='postgresql://USER@HOST:PORT/DATABASE' (or [store] "
                "url in wakeful.toml), or leave the cluster out for one process."
            )
        self._tg, self._sessions, self._submit, self._forget = tg, sessions, submit, forget
        self._has_tasks = has_tasks
        self._on_settled = settled
        self._take_up = take_up or _nothing_to_take_up
        self._saw = saw
        ownership = self.ownership = SessionOwnership(
            store,
            self,
            lease_seconds=self._lease_seconds,
            name=self._name,
            claim_batch=self._claim_batch,
            max_sessions=self._max_sessions,
            idle_release_s=self._idle_release_s,
        )
        await tg.start(ownership.run, name="session ownership")
        for session in await _sessions_with_work(store):
            await ownership.route(session)
        await ownership.claim_pass()
        await self.wait_settled()

    @property
    def lease_seconds(self) -> float:
        """How long this worker's leases last unless renewed (its roles' too)."""
        return self._lease_seconds

    @property
    def settling(self) -> bool:
        """Whether a session taken over (or woken) here is still being handed its events: an
        event routed to it is not in its session yet, so the runtime is not idle."""
        return self._in_flight > 0

    async def wait_settled(self) -> None:
        """Wait until every take-over and catch-up started so far is done."""
        while self._in_flight:
            await self._settled.wait()

    def fenced(self, session: str) -> FencedStore | None:
        """Where `session`'s own writes go (a :data:`~wakeful.core.session_writes.SessionWrites`):
        its fenced view while it is owned here; the last one it had here once it is lost (a
        write still under way for it is refused, not made unfenced); None for a session never
        owned here (the shared store: an operator alert, say)."""
        view = self.ownership.view(session) if self.ownership is not None else None
        return view if view is not None else self._last_views.get(session)

    def writes(self, session: str) -> _FencedWrites | None:
        """The fenced writes of `session`'s trajectory while it is owned here, else None."""
        view = self.ownership.view(session) if self.ownership is not None else None
        return _FencedWrites(view) if view is not None else None

    async def route(self, event: Event) -> Decision | None:
        """None when the runtime hands `event` (stored already) to its session here; else how
        it was dealt with: taken over here with its session (handed with its pending events),
        or left to the worker that owns the session (woken by the stored event)."""
        if self.ownership is None:
            return None
        where = await self.ownership.route(event.session)
        if where is Route.HERE:
            handed = self._handed.setdefault(event.session, set())
            if event.id in handed:  # handed already, with its session's pending events
                return Decision(Strategy.QUEUE, reason="handed already", wake=False)
            view = self.ownership.view(event.session)
            if self._taking_over.get(event.session) and view is not None:
                # A take-over of this worker (a claim pass that saw the event's notification)
                # is under way: it reloads the session and hands it its pending events; one
                # catch-up after it hands what it read too early to see.
                self._spawn(self._catch_up, event.session, view)
                reason = "the session is being taken over here; the event is handed with it"
                return Decision(Strategy.QUEUE, reason=reason, wake=False)
            handed.add(event.id)
            return None
        if where is Route.TAKEN:
            reason = "the session was taken over here; its pending events are handed with it"
        else:
            reason = "another worker owns the session; it was woken and handles the event"
        return Decision(Strategy.QUEUE, reason=reason, wake=False)

    # --- SessionHandler ------------------------------------------------------------------------

    def claimed(self, session: str, store: FencedStore) -> None:
        # A new lease: nothing handed under it yet. Reset now, not when the take-over runs: an
        # event routed here meanwhile is handed directly and must not be handed again.
        self._handed[session] = set()
        self._last_views.pop(session, None)
        self._last_views[session] = store  # the newest last: dropped last
        self._drop_old_views()
        self._taking_over[session] = self._taking_over.get(session, 0) + 1
        self._spawn(self._take_over, session, store)

    def _drop_old_views(self) -> None:
        excess = len(self._last_views) - LOST_VIEWS_KEPT
        if excess <= 0 or self.ownership is None:
            return
        ownership = self.ownership
        for session in [s for s in self._last_views if ownership.view(s) is None][:excess]:
            del self._last_views[session]

    def woken(self, session: str, store: FencedStore) -> None:
        self._spawn(self._catch_up, session, store)

    def lost(self, session: str) -> None:
        self._handed.pop(session, None)
        lock = self._locks.get(session)
        if lock is not None and not lock.locked():
            # A hand-off still waiting on it finds its view stale and returns; a new lease's
            # hand-offs get a new lock.
            del self._locks[session]
        if self._forget is not None:
            self._forget(session)

    def moved(self, session: str) -> None:
        """A copy of `session` stopped because its writes were refused under an older lease:
        when this worker owns the session (under a newer lease), a new copy is handed the
        events the old one held."""
        view = self.ownership.view(session) if self.ownership is not None else None
        if view is None:
            return
        self._handed[session] = set()  # the copy they were handed to is gone
        self._spawn(self._catch_up, session, view)

    def busy(self, session: str) -> bool:
        if self._has_tasks(session):
            return True
        loaded = self._sessions.by_id.get(session) if self._sessions is not None else None
        return loaded is not None and (not loaded.idle or bool(loaded.passive))

    # --- taking sessions over ------------------------------------------------------------------

    def _spawn(
        self, work: Callable[[str, FencedStore], Awaitable[None]], session: str, view: FencedStore
    ) -> None:
        assert self._tg is not None
        self._in_flight += 1
        self._tg.start_soon(self._run, work, session, view, name=f"{work.__name__} {session}")

    async def _run(
        self, work: Callable[[str, FencedStore], Awaitable[None]], session: str, view: FencedStore
    ) -> None:
        from ..store.postgres import LeaseLost

        lock = self._locks.setdefault(session, anyio.Lock())
        try:
            async with lock:
                if self.ownership is None or self.ownership.view(session) is not view:
                    return  # lost (or taken again under a new lease) meanwhile
                await work(session, view)
        except LeaseLost as exc:
            log.warning("%s", exc)
        except StoreError as exc:
            # Left pending: the next wake-up, poll or owner picks the events up again.
            log.warning("Could not hand session %r its pending events: %s", session, exc)
        finally:
            if work == self._take_over:
                left = self._taking_over.pop(session, 1) - 1
                if left:
                    self._taking_over[session] = left
            self._in_flight -= 1
            if not self._in_flight:
                self._settled.set()
                self._settled = anyio.Event()
                self._on_settled()

    async def _take_over(self, session: str, view: FencedStore) -> None:
        """Recover `session`, just owned here: loaded with fenced writes (its trajectory
        repaired), its previous owners' running tasks reported lost, its pending events queued,
        then started."""
        assert self._sessions is not None and self._submit is not None and self._forget
        if session in self._sessions.by_id:
            self._forget(session)  # loaded before it was owned: reload it fenced
        await self._take_up(session)
        loaded = await self._sessions.loaded(session)
        lost = await view.task_records.mark_running_lost()
        await self._queue_pending(loaded, view)
        await self._sessions.start(loaded)
        for record in lost:
            await self._submit(lost_task_alert(record))

    async def _catch_up(self, session: str, view: FencedStore) -> None:
        """Hand `session`, owned here, the pending events it was not handed yet."""
        assert self._sessions is not None
        await self._queue_pending(await self._sessions.session(session), view)

    async def _queue_pending(self, session: AgentSession, view: FencedStore) -> None:
        handed = self._handed.setdefault(session.id, set())
        consumed = session.trajectory.consumed_event_ids()
        for event in await view.events.pending(session.id):
            if event.id in handed:
                continue
            handed.add(event.id)
            if event.id in consumed:
                # Appended just before its previous owner died, marked consumed too late.
                await view.events.mark([event.id], "consumed")
                continue
            self._saw(event)  # the user's activity, and the channel the session's replies go to
            await session.handle(event)
