"""The repositories a session's own writes go through, resolved per session.

One process (the SQLite store, or no store) writes every session's records through the shared
repositories. When several workers share a PostgreSQL store, a session's own writes (a message to
the user, a request to a person, a task record, a child agent's record) must go through the
view fenced by its owner's lease, so that a worker that lost the session can write nothing more
for it. The runtime's parts that make such writes (the outbox, the task manager, the queue of
requests to people, the subagents) each ask one :data:`SessionWrites` for the session they
write for: the answer is the fenced view, or None for their own shared repository.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .repositories import (
    HumanRequestRepository,
    MessageRepository,
    SubagentRepository,
    TaskRepository,
)

__all__ = ["SessionRepositories", "SessionWrites", "shared_writes"]


class SessionRepositories(Protocol):
    """The repositories of one session's own writes (a PostgreSQL store's fenced view is one)."""

    @property
    def messages(self) -> MessageRepository: ...

    @property
    def task_records(self) -> TaskRepository: ...

    @property
    def subagents(self) -> SubagentRepository: ...

    @property
    def human_requests(self) -> HumanRequestRepository: ...


# Where `session`'s own writes go: its repositories, or None for the shared ones.
SessionWrites = Callable[[str], SessionRepositories | None]


def shared_writes(session: str) -> SessionRepositories | None:
    """Every session writes through the shared repositories (one process)."""
    return None
