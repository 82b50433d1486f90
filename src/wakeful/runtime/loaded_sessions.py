"""The sessions a runtime holds in memory: each loaded once (concurrent first uses share one
load), its loop started once in the runtime's task group, handed its events, and unloaded when
it may go.

The runtime decides when a session may be unloaded (see `Runtime._evict`); this keeps what that
decision and the idle check need: which sessions are running, which may be working, and which
are being handed an event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from ..agent.router import Decision
    from ..agent.session import AgentSession
    from ..events import Event

__all__ = ["LoadedSessions"]


class LoadedSessions:
    """The sessions in memory by id (`by_id`), loaded through `load(session_id)`."""

    def __init__(self, load: Callable[[str], Awaitable[AgentSession]]) -> None:
        self._load = load
        self.by_id: dict[str, AgentSession] = {}
        # The cancel scope of each running session loop, by session id.
        self._loops: dict[str, anyio.CancelScope] = {}
        # Sessions that may be working: handed an event or started since `all_idle` last saw
        # them idle. The idle check looks at these only, not at every session in memory.
        self._active: set[str] = set()
        # Events being handed to each session: a session is never unloaded while it has one.
        self._handing: dict[str, int] = {}
        # Sessions being loaded from the store, so that concurrent first uses load one.
        self._loading: dict[str, anyio.Event] = {}
        # Where session loops run, once the runtime runs; while `held`, none is started.
        self._tg: TaskGroup | None = None
        self._held = False
        # Told the id of a session whose copy was dropped because its lease moved (a store
        # shared by workers), so the pending events it held can be handed to a new copy.
        self.on_moved: Callable[[str], None] | None = None

    def open(self, tg: TaskGroup) -> None:
        """Run session loops in `tg` from now on."""
        self._tg = tg

    @contextmanager
    def held(self) -> Iterator[None]:
        """Load sessions without starting them (while recovery queues their work), then start
        every session in memory with `start_all`."""
        self._held = True
        try:
            yield
        finally:
            self._held = False

    async def session(self, session_id: str) -> AgentSession:
        """The session, loaded if needed and started unless `held`."""
        session = await self.loaded(session_id)
        if not self._held:
            await self.start(session)
        return session

    async def hand(self, event: Event) -> Decision:
        """Hand a stored event to its session, loading the session if needed.

        The session cannot be unloaded from the moment this starts until the event is in its
        queue, so the event reaches a session that will handle it, exactly once."""
        session_id = event.session
        self._handing[session_id] = self._handing.get(session_id, 0) + 1
        try:
            session = await self.session(session_id)
            decision = await session.handle(event)
            self._active.add(session_id)  # no await since the event was queued
        finally:
            left = self._handing.pop(session_id) - 1
            if left:
                self._handing[session_id] = left
        return decision

    async def loaded(self, session_id: str) -> AgentSession:
        """The session in memory, loading it if needed; concurrent callers share one load."""
        while (session := self.by_id.get(session_id)) is None:
            loading = self._loading.get(session_id)
            if loading is None:
                break
            await loading.wait()
        if session is not None:
            return session
        loading = self._loading[session_id] = anyio.Event()
        try:
            session = await self._load(session_id)
            self.by_id[session_id] = session
        finally:
            del self._loading[session_id]
            loading.set()
        return session

    async def start(self, session: AgentSession) -> None:
        """Start the session's loop, unless it runs already (or the runtime does not)."""
        if session.id in self._loops or self._tg is None:
            return
        scope = self._loops[session.id] = anyio.CancelScope()
        self._tg.start_soon(self._run, session, scope, name=f"session {session.id}")
        await session.wait_started()
        self._active.add(session.id)

    async def start_all(self) -> None:
        """Start every session in memory that is not running yet."""
        # A copy: a started session may create others (an event for a new session) meanwhile.
        for session in list(self.by_id.values()):
            await self.start(session)

    async def _run(self, session: AgentSession, scope: anyio.CancelScope) -> None:
        with scope:  # cancelled when the session is unloaded
            await session.run()
        if session.moved and self.by_id.get(session.id) is session:
            # Its lease went to another owner: forget this copy, so that an event for the
            # session loads it again (here, when this worker owns it under a new lease).
            self._forget(session.id)
            if self.on_moved is not None:
                self.on_moved(session.id)

    def may_unload(self, session: AgentSession) -> bool:
        """Idle with nothing of its own in flight that this knows of: no event waiting, held
        for its next batch or being handed to it, no side answer; and its loop runs here."""
        if not session.idle or session.passive or self._handing.get(session.id):
            return False
        return session.id in self._loops

    def unload(self, session_id: str) -> None:
        """Stop the session's loop (if it runs) and forget it; its next event loads it
        again."""
        loop = self._forget(session_id)
        if loop is not None:
            loop.cancel()

    def _forget(self, session_id: str) -> anyio.CancelScope | None:
        """Drop the session from memory; return its loop's cancel scope, if it runs."""
        del self.by_id[session_id]
        self._active.discard(session_id)
        return self._loops.pop(session_id, None)

    def all_idle(self) -> bool:
        """No session is working or holding pending events.

        It costs O(sessions handed work since the last check), not O(sessions in memory):
        sessions found idle are dropped from the set it looks at until work reaches them."""
        for session_id in list(self._active):
            session = self.by_id.get(session_id)
            if session is not None and not session.idle:
                return False
            self._active.discard(session_id)
        return True
