"""Batch markers and the status block: how pending events are appended at a safe point.

A single pending event is appended as it is, so the common case reads like an ordinary chat.
Several are numbered `[Unprocessed event i/N]` and closed by a summary that counts them by kind
and asks the model to answer all of them, because models otherwise attend to the last one only.
A batch holds at most `SessionConfig.max_events_per_batch` items; when more wait, a last line
counts them by kind and says they come in the next batch (numbered from 1 again).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..events import Event, render_event
from ..tools.tasks import TaskHandle

_KIND_LABELS = {
    "user.input": ("user message", "user messages"),
    "user.interrupt": ("user interrupt", "user interrupts"),
    "supervisor.instruction": ("supervisor instruction", "supervisor instructions"),
    "agent.input": ("agent message", "agent messages"),
    "agent.interrupt": ("agent interrupt", "agent interrupts"),
    "tool.result": ("tool result", "tool results"),
    "tool.progress": ("progress update", "progress updates"),
    "subagent.result": ("subagent result", "subagent results"),
    "subagent.progress": ("subagent update", "subagent updates"),
    "subagent.question": ("subagent question", "subagent questions"),
    "human.answer": ("answer from a person", "answers from a person"),
    "timer.trigger": ("timer", "timers"),
    "shell.output": ("shell output", "shell outputs"),
    "email.received": ("email", "emails"),
    "webhook.received": ("webhook", "webhooks"),
    "im.message": ("instant message", "instant messages"),
    "system.alert": ("system alert", "system alerts"),
    "parallel": ("exchange answered in parallel", "exchanges answered in parallel"),
    "note": ("runtime note", "runtime notes"),
}


@dataclass(frozen=True, slots=True)
class ParallelExchange:
    """A side query answered in parallel with the main task, to be recorded in the main one."""

    event: Event
    answer: str

    def render(self) -> str:
        return (
            "[Answered in parallel with the main task; already sent to the user] "
            f"The user asked: {self.event.text}\nAnswer sent: {self.answer}"
        )


@dataclass(frozen=True, slots=True)
class Note:
    """Something the runtime itself did that the model must know, e.g. tasks it cancelled."""

    text: str

    def render(self) -> str:
        return f"[Runtime] {self.text}"


PendingItem = Event | ParallelExchange | Note


def _label(kind: str, count: int) -> str:
    singular, plural = _KIND_LABELS.get(kind, (f"{kind} event", f"{kind} events"))
    return f"{count} {singular if count == 1 else plural}"


def _render(item: PendingItem) -> str:
    return render_event(item) if isinstance(item, Event) else item.render()


def item_kind(item: PendingItem) -> str:
    if isinstance(item, ParallelExchange):
        return "parallel"
    if isinstance(item, Note):
        return "note"
    return item.kind


def _count_by_kind(items: Sequence[PendingItem]) -> str:
    counts = Counter(item_kind(item) for item in items)
    return ", ".join(_label(kind, c) for kind, c in counts.items())


def render_batch(items: Sequence[PendingItem], *, waiting: Sequence[PendingItem] = ()) -> str:
    """The text of the user message that carries `items` into the trajectory; `waiting` are
    the items left for the next batch (only counted here)."""
    if len(items) == 1 and not waiting:
        return _render(items[0])
    n = len(items)
    lines = [f"[Unprocessed event {i}/{n}] {_render(item)}" for i, item in enumerate(items, 1)]
    lines.append(
        f"[{n} unprocessed events above: {_count_by_kind(items)}. Address all of them in your "
        "response, not only the last one.]"
    )
    if waiting:
        lines.append(
            f"[{len(waiting)} more events wait: {_count_by_kind(waiting)}. They come in the "
            "next batch, after your response to these.]"
        )
    return "\n".join(lines)


def split_batch(
    pending: Sequence[PendingItem],
    riding: Sequence[Event],
    limit: int,
    *,
    first: Callable[[Event], bool],
) -> tuple[list[PendingItem], list[PendingItem], list[Event]]:
    """At most `limit` items for one batch: `(batch, pending left, riding left)`.

    Pending events for which `first` holds (those that interrupted, e.g. a stop) are taken
    whatever their place in the queue, then the oldest other pending items, then progress
    updates riding along; the batch lists them in their usual order (riding updates, then
    pending items as they arrived), so the numbering reads in arrival order."""
    urgent = [i for i, item in enumerate(pending) if isinstance(item, Event) and first(item)]
    chosen = set(urgent[:limit])
    for i in range(len(pending)):
        if len(chosen) >= limit:
            break
        chosen.add(i)
    room = limit - len(chosen)
    batch: list[PendingItem] = [*riding[:room]]
    batch += [item for i, item in enumerate(pending) if i in chosen]
    left = [item for i, item in enumerate(pending) if i not in chosen]
    return batch, left, list(riding[room:])


def render_status(
    tasks: Sequence[TaskHandle], loaded_tools: Sequence[str], *, away: str = ""
) -> str:
    """The status block: running background tasks, the tools loaded so far, and, when a
    background result arrives while the user is `away` (that line), the prompt to tell them
    ("" if none of these)."""
    parts: list[str] = []
    if tasks:
        described = []
        for t in tasks:
            percent = f", {t.percent:.0f}%" if t.percent is not None else ""
            what = f" {t.description!r}" if t.description else ""
            described.append(f"{t.id} ({t.tool}{what}{percent}, {t.runtime_seconds:.0f}s)")
        parts.append("background tasks running: " + "; ".join(described))
    if loaded_tools:
        parts.append("tools loaded: " + ", ".join(loaded_tools))
    if away:
        parts.append(
            f"{away}: if a result above is one the user asked for, tell them with "
            "send_user_notification (urgency 'high' also reaches their phone or IM)"
        )
    return f"[Status] {' | '.join(parts)}" if parts else ""
