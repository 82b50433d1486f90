"""`system.process_timeout`: a background task has run past its deadline.

The deadline is the task's own (`TaskHandle.deadline_seconds`) or the channel's default. It is
soft: the task runs on, and the agent, told once, decides — cancel it, look at its output, or
let it finish. The event goes to the session that started the task and names everything that
decision needs: the task, its tool and command, how long it ran, its last output line, and the
calls that act on it. Its id is "timeout <task id>": a task is reported once.
"""

from __future__ import annotations

from datetime import timedelta

from ...core.channel import source_event_id
from ...events import SYSTEM_PROCESS_TIMEOUT, Event, Source
from ...tools.tasks import TaskHandle, TaskManager
from .deliver import Deliver

__all__ = ["TimeoutMonitor"]


class TimeoutMonitor:
    """Reports each background task that outlives its deadline, once."""

    def __init__(
        self, *, channel: str, default_deadline: timedelta, tasks: TaskManager, deliver: Deliver
    ) -> None:
        self._channel = channel
        self._default = default_deadline.total_seconds()
        self._tasks = tasks
        self._deliver = deliver
        self._reported: set[str] = set()

    @property
    def overdue(self) -> list[str]:
        """The ids of running tasks reported as past their deadline."""
        return [task.id for task in self._tasks.running() if task.id in self._reported]

    async def check(self) -> None:
        running = self._tasks.running()
        # Forget tasks that ended: their ids are never reused.
        self._reported.intersection_update(task.id for task in running)
        for task in running:
            deadline = task.deadline_seconds or self._default
            if task.id in self._reported or task.runtime_seconds < deadline:
                continue
            await self._deliver(self._event(task, deadline))
            self._reported.add(task.id)

    def _event(self, task: TaskHandle, deadline: float) -> Event:
        ran = round(task.runtime_seconds, 1)
        last = task.last_lines(1)
        what = f"{task.tool}: {task.description}" if task.description else task.tool
        summary = (
            f"Background task {task.id} ({what}) has run {_duration(ran)}, past its deadline of "
            f"{_duration(deadline)}; it is still running."
        )
        return Event(
            id=source_event_id(self._channel, f"timeout {task.id}"),
            kind=SYSTEM_PROCESS_TIMEOUT,
            source=Source(type="system", id="process_timeout"),
            channel=self._channel,
            session=task.session,
            content={
                "summary": summary,
                "task_id": task.id,
                "tool": task.tool,
                "command": task.description,
                "started_at": task.started_at.isoformat(),
                "running_seconds": ran,
                "deadline_seconds": deadline,
                "deadline_from": "task" if task.deadline_seconds else "channel default",
                "percent": task.percent,
                "output_lines": task.output_line_count,
                "last_output_line": last[0] if last else None,
                "options": [
                    f'cancel_task(task_id="{task.id}") stops it and everything it started',
                    f'task_status(task_id="{task.id}") shows its latest output',
                    "doing nothing lets it run on; its result arrives as a tool.result event",
                ],
            },
            context={"task_id": task.id, "tool": task.tool},
        )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
