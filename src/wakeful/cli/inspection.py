"""`wakeful events tail`, `wakeful tasks` and `wakeful timers`: what a running or stopped
runtime's store holds, read without changing it."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from rich.markup import escape

from ..core.records import EventStatus, StoredEvent
from .console import out
from .store import DbAliasOption, InspectConfigOption, StoreOption, reading_any_store, store_name

if TYPE_CHECKING:
    from rich.table import Table

    from ..store.postgres.reader import TailPosition
    from .store import InspectedStore

__all__ = ["events_app", "register"]

events_app = typer.Typer(
    help="Inspect the events of a running or stopped runtime.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def register(app: typer.Typer) -> None:
    """Add `events tail`, `tasks` and `timers` to the `wakeful` application."""
    app.add_typer(events_app, name="events")
    app.command("tasks")(tasks_command)
    app.command("timers")(timers_command)


# How often `events tail --follow` looks for new events, and how many it reads per look.
FOLLOW_POLL_SECONDS: Final = 0.5
FOLLOW_BATCH: Final = 500

SessionFilter = Annotated[
    str | None, typer.Option("--session", "-s", help="Only this session.", show_default=False)
]


@events_app.command("tail")
def events_tail(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    session: SessionFilter = None,
    db: DbAliasOption = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100_000, help="How many events to show.")
    ] = 20,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='One JSON object per line: {"rowid", "status", "event"}.'),
    ] = False,
    filtered: Annotated[
        bool,
        typer.Option(
            "--filtered",
            help="Only the events a channel's filter kept from the agent, with the reason.",
        ),
    ] = False,
) -> None:
    """Show the latest events, oldest first, with their status (pending, consumed, or filtered:
    stored but kept from the agent by its channel's filter)."""
    from .inspect_views import event_json, events_table

    status: EventStatus | None = "filtered" if filtered else None
    table = filtered_table if filtered else events_table
    with reading_any_store(config, store, db) as reader:
        tail = EventTail(reader, session, status)
        latest = tail.latest(limit)
        if as_json:
            for stored in latest:
                _print_json(event_json(stored))
            sys.stdout.flush()
        elif latest:
            out.print(table(latest))
        else:
            where = f" of session {session!r}" if session is not None else ""
            waiting = "; waiting for new ones (Ctrl-C stops)" if follow else ""
            out.print(
                f"[dim]No {'filtered ' if filtered else ''}events{escape(where)} in "
                f"{escape(store_name(reader))} yet{waiting}.[/dim]"
            )
        if not follow:
            return
        try:
            while True:
                time.sleep(FOLLOW_POLL_SECONDS)
                new = tail.next(FOLLOW_BATCH)
                if not new:
                    continue
                if as_json:
                    for stored in new:
                        _print_json(event_json(stored))
                    sys.stdout.flush()
                else:
                    out.print(table(new, header=not latest))
                    latest = new
        except KeyboardInterrupt:
            return


class EventTail:
    """The events of a store in the order a follower must read them, from where it stands.

    A SQLite store has one writer, which commits rowids in order, so the position is the last
    rowid read. On PostgreSQL several workers commit seqs out of order, so the position is the
    reader's (transaction, seq) :class:`~wakeful.store.postgres.reader.TailPosition`, which no
    row committed late can fall behind.
    """

    def __init__(
        self, reader: InspectedStore, session: str | None, status: EventStatus | None
    ) -> None:
        self._reader = reader
        self._session = session
        self._status = status
        self._last_rowid = 0
        self._position: TailPosition | None = None

    def latest(self, limit: int) -> list[StoredEvent]:
        """The last `limit` events, oldest first; following goes on after them."""
        return self._read(limit, first=True)

    def next(self, limit: int) -> list[StoredEvent]:
        """Up to `limit` events stored since the last read, oldest first."""
        return self._read(limit, first=False)

    def _read(self, limit: int, *, first: bool) -> list[StoredEvent]:
        from ..store.reader import StoreReader

        reader = self._reader
        if isinstance(reader, StoreReader):
            after = None if first else self._last_rowid
            events = reader.recent_events(limit, self._session, after, status=self._status)
            if events:
                self._last_rowid = events[-1].rowid
            return events
        events, self._position = reader.tail_events(
            limit, self._session, status=self._status, after=None if first else self._position
        )
        return events


def filtered_table(events: Sequence[StoredEvent], *, header: bool = True) -> Table:
    """Filtered events as a table: who sent what, and why the filter kept it from the agent."""
    from rich.table import Table

    from .inspect_views import local_time, one_line_cell

    table = Table(show_header=header, box=None, header_style="bold", pad_edge=False)
    table.add_column("time", no_wrap=True)
    table.add_column("channel", no_wrap=True, min_width=12)
    table.add_column("source", min_width=14, max_width=24)
    table.add_column("reason", min_width=20, max_width=48)
    table.add_column("content")
    for stored in events:
        event = stored.event
        source = f"{event.source.type}:{event.source.id}" if event.source.id else event.source.type
        reason = event.context.get("filtered")
        table.add_row(
            local_time(event.ts),
            one_line_cell(event.channel),
            one_line_cell(source),
            one_line_cell(reason if isinstance(reason, str) else "(no reason stored)"),
            one_line_cell(event.text),
        )
    return table


def tasks_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    session: SessionFilter = None,
    db: DbAliasOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One task per line as JSON.")] = False,
) -> None:
    """List the stored tasks (background work and finished calls), lost ones included."""
    from .inspect_views import task_json, tasks_table

    with reading_any_store(config, store, db) as reader:
        records = reader.tasks(session)
        if as_json:
            for record in records:
                _print_json(task_json(record))
        elif records:
            out.print(tasks_table(records))
        else:
            where = f" of session {session!r}" if session is not None else ""
            out.print(f"[dim]No tasks{escape(where)} in {escape(store_name(reader))}.[/dim]")


def timers_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    session: SessionFilter = None,
    db: DbAliasOption = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also list finished and cancelled timers.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One timer per line as JSON.")] = False,
) -> None:
    """List the active timers, soonest first, with their next fire in local time and UTC."""
    from .inspect_views import timer_json, timers_table

    with reading_any_store(config, store, db) as reader:
        records = reader.timers(session, active_only=not show_all)
        if as_json:
            for record in records:
                _print_json(timer_json(record))
        elif records:
            out.print(timers_table(records, with_state=show_all))
        else:
            which = "timers" if show_all else "active timers"
            where = f" of session {session!r}" if session is not None else ""
            out.print(f"[dim]No {which}{escape(where)} in {escape(store_name(reader))}.[/dim]")


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
