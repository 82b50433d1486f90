"""What a runtime picks up at start from a previous run that crashed or stopped.

After a crash (or kill -9): a trajectory cut off mid-turn is repaired (a call without its
result is answered as lost, a reply whose message went out is answered as sent), events stored
but not yet handled are re-queued to their sessions, and tasks that were running are reported
lost. After a clean stop: each task the stop cut off left a note, stored as a pending event, so
that its session is told at the next start rather than waiting for a result that never comes.
Only the sessions concerned are loaded; every other one loads on its next event.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..agent.trajectory import Trajectory, TrajectoryStore
from ..events import SYSTEM_ALERT, Event, Source

if TYPE_CHECKING:
    from ..agent.router import Decision
    from ..agent.session import AgentSession
    from ..core.runtime_store import RuntimeStore
    from ..tools.tasks import TaskRecord

__all__ = ["record_stopped_task", "recover", "restored_trajectory"]

logger = logging.getLogger(__name__)


async def restored_trajectory(
    session_id: str, store: RuntimeStore | None, *, writes: TrajectoryStore | None = None
) -> Trajectory:
    """The session's trajectory as stored (empty without a store), repaired where a crash cut
    it off, so that the model sees every call answered. `writes`: where its writes go instead
    of `store` (a worker's fenced view of a session it owns, see `.worker`)."""
    messages = await store.load_trajectory(session_id) if store else []
    trajectory = Trajectory(session_id, messages, store=writes or store)
    if store is not None:
        # A reply whose message went out before the crash is answered as sent, not lost.
        from ..toolkits.comms.reply import recovered_replies

        known = await recovered_replies(store, trajectory)
        if known:
            await trajectory.append(*known)
    await trajectory.repair()
    return trajectory


async def recover(
    store: RuntimeStore,
    *,
    load: Callable[[str], Awaitable[AgentSession]],
    submit: Callable[[Event], Awaitable[Decision]],
) -> None:
    """Load the sessions a previous run left with work and queue that work, without starting
    them: cut-off trajectories (repaired as they load), pending events, lost tasks.

    `load` loads a session into memory without starting its loop; `submit` must not start one
    either while this runs, so that each session's first model request sees the whole picture.
    """
    # Loading repairs a call left without its result; a session whose last message awaits the
    # model makes its request once started.
    for session_id in await store.sessions_to_resume():
        session = await load(session_id)
        if session.trajectory.needs_model:
            # Said, not done silently: the user may have given up on that answer.
            logger.warning(
                "Session %s: the previous run stopped before the agent had answered (the "
                "model failed, or the runtime stopped or crashed); asking the model again now.",
                session_id,
            )
    for event in await store.pending_events():
        session = await load(event.session)
        if event.id in session.trajectory.consumed_event_ids():
            # Appended just before a crash, marked consumed too late: not twice.
            await store.mark_events([event.id], "consumed")
            continue
        await session.handle(event)
    for record in await store.mark_running_tasks_lost():
        await submit(lost_task_alert(record))


def lost_task_alert(record: TaskRecord) -> Event:
    """The alert to a task's session that the task died with the previous run."""
    return Event(
        kind=SYSTEM_ALERT,
        source=Source(type="system", id="runtime"),
        content=(
            f"Task {record.id} ({record.tool} {record.description!r}) was lost "
            "when the runtime stopped without shutting down (it crashed or was "
            "killed); the processes it started were killed with it, so it is no "
            "longer running and its result is unknown. Check what it did before "
            "running it again."
        ),
        context={"task_id": record.id, "state": "lost"},
        session=record.session,
    )


def record_stopped_task(store: RuntimeStore, record: TaskRecord) -> None:
    """Store a background task the runtime's stop cut off, with the note its session reads at
    the next start (see `TaskManager`'s `on_stopped`).

    The note is stored, not handed over: the session's trajectory says the task was started and
    its result would come as an event, so without it the agent would wait for a result that
    never comes, or assume one. It is a pending event, so the next start loads the session and
    tells it before anything else, in the batch of whatever else is pending.
    """
    if store.closed:
        return
    note = Event(
        kind=SYSTEM_ALERT,
        source=Source(type="system", id="runtime"),
        content=(
            f"Task {record.id} ({record.tool} {record.description!r}) was stopped when the "
            "runtime shut down; any processes it started were stopped and its result is "
            "unknown. Run it again if it is still needed."
        ),
        context={"task_id": record.id, "state": "cancelled", "reason": record.cancel_reason},
        session=record.session,
    )
    store.save_stopped_task_nowait(record, note)
