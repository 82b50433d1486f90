"""`wakeful events tail`, `wakeful tasks` and `wakeful timers`: what a running or stopped
runtime's store holds, read without changing it."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any, Final

import typer
from rich.markup import escape

from .console import out
from .store import DbAliasOption, InspectConfigOption, StoreOption, reading_store

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
) -> None:
    """Show the latest events, oldest first, with their status (pending or consumed)."""
    from .inspect_views import event_json, events_table

    with reading_store(config, store, db) as reader:
        latest = reader.recent_events(limit, session)
        if as_json:
            for stored in latest:
                _print_json(event_json(stored))
            sys.stdout.flush()
        elif latest:
            out.print(events_table(latest))
        else:
            where = f" of session {session!r}" if session is not None else ""
            waiting = "; waiting for new ones (Ctrl-C stops)" if follow else ""
            out.print(
                f"[dim]No events{escape(where)} in {escape(str(reader.path))} yet{waiting}.[/dim]"
            )
        if not follow:
            return
        last_rowid = latest[-1].rowid if latest else 0
        try:
            while True:
                time.sleep(FOLLOW_POLL_SECONDS)
                new = reader.recent_events(FOLLOW_BATCH, session, after_rowid=last_rowid)
                if not new:
                    continue
                last_rowid = new[-1].rowid
                if as_json:
                    for stored in new:
                        _print_json(event_json(stored))
                    sys.stdout.flush()
                else:
                    out.print(events_table(new, header=not latest))
                    latest = new
        except KeyboardInterrupt:
            return


def tasks_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    session: SessionFilter = None,
    db: DbAliasOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One task per line as JSON.")] = False,
) -> None:
    """List the stored tasks (background work and finished calls), lost ones included."""
    from .inspect_views import task_json, tasks_table

    with reading_store(config, store, db) as reader:
        records = reader.tasks(session)
        if as_json:
            for record in records:
                _print_json(task_json(record))
        elif records:
            out.print(tasks_table(records))
        else:
            where = f" of session {session!r}" if session is not None else ""
            out.print(f"[dim]No tasks{escape(where)} in {escape(str(reader.path))}.[/dim]")


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

    with reading_store(config, store, db) as reader:
        records = reader.timers(session, active_only=not show_all)
        if as_json:
            for record in records:
                _print_json(timer_json(record))
        elif records:
            out.print(timers_table(records, with_state=show_all))
        else:
            which = "timers" if show_all else "active timers"
            where = f" of session {session!r}" if session is not None else ""
            out.print(f"[dim]No {which}{escape(where)} in {escape(str(reader.path))}.[/dim]")


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
