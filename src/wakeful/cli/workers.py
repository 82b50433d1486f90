"""`wakeful workers`: the workers sharing a PostgreSQL store, the sessions each owns, and the
roles it holds (``channel:<name>``: the channels that pull, which run on that worker only).

A worker is *live* while it renews its heartbeat, *stopped* once it shut down cleanly (its
sessions were released), and *lapsed* when its heartbeat is older than its lease time: it died,
froze or lost the database, and its sessions are being (or were) taken over by live workers.
Ages are measured by the database's clock, so they are right whatever the clocks of the
machines running the workers say.

Rows of stopped and lapsed workers stay until pruned: the list shows live workers and those
gone for less than an hour (saying how many older ones it hides; `--all` shows them), and
`--prune` deletes those gone for longer than `--older-than` (a day by default), except the
ones a lease, a running task or a running idempotency claim still names. Without `--prune`
the command only reads.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import StoreError, UserError
from .console import fail, out
from .durations import parse_duration
from .store import InspectConfigOption, StoreOption, reading_database, store_location

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool

    from ..store.postgres.leases import PrunedWorkers, WorkerInfo

    _Pool = AsyncConnectionPool[AsyncConnection[TupleRow]]

T = TypeVar("T")

__all__ = ["register", "worker_json", "worker_state"]

_SESSIONS_SHOWN = 3
RECENT_S: Final = 3600.0
"""How long a stopped or lapsed worker stays in the list without --all."""
DEFAULT_PRUNE_AGE: Final = "1d"


def register(app: typer.Typer) -> None:
    """Add the `workers` command to the `wakeful` app."""
    app.command("workers")(workers)


def worker_state(info: WorkerInfo) -> str:
    """live, stopped (shut down cleanly) or lapsed (its heartbeat is older than its lease)."""
    if info.stopped_at is not None:
        return "stopped"
    return "live" if info.alive else "lapsed"


def worker_json(info: WorkerInfo, roles: Sequence[str] = ()) -> dict[str, Any]:
    """One worker as `--json` prints it, with the `roles` it holds."""
    return {
        "worker": info.id,
        "host": info.host,
        "pid": info.pid,
        "state": worker_state(info),
        "started_at": info.started_at.isoformat(),
        "stopped_at": None if info.stopped_at is None else info.stopped_at.isoformat(),
        "heartbeat_age_s": round(info.heartbeat_age_s, 3),
        "gone_for_s": None if info.gone_for_s is None else round(info.gone_for_s, 3),
        "sessions": [
            {
                "session": held.session,
                "epoch": held.epoch,
                "held_for_s": round(held.held_for_s, 3),
                "expires_in_s": round(held.expires_in_s, 3),
            }
            for held in info.sessions
        ],
        "roles": list(roles),
    }


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _sessions_cell(info: WorkerInfo) -> str:
    names = [held.session for held in info.sessions]
    if not names:
        return "0"
    shown = ", ".join(names[:_SESSIONS_SHOWN])
    more = f", … ({len(names) - _SESSIONS_SHOWN} more)" if len(names) > _SESSIONS_SHOWN else ""
    return f"{len(names)}: {shown}{more}"


def _workers_table(found: list[WorkerInfo], roles: Mapping[str, Sequence[str]]) -> Table:
    table = Table(box=None, pad_edge=False)
    columns = ("WORKER", "HOST", "PID", "STATE", "HEARTBEAT", "SESSIONS", "LONGEST HELD", "ROLES")
    for column in columns:
        table.add_column(column)
    for info in found:
        longest = max((held.held_for_s for held in info.sessions), default=None)
        table.add_row(
            escape(info.id),
            escape(info.host),
            str(info.pid),
            worker_state(info),
            f"{_age(info.heartbeat_age_s)} ago",
            escape(_sessions_cell(info)),
            "-" if longest is None else _age(longest),
            escape(", ".join(roles.get(info.id, ())) or "-"),
        )
    return table


def _sessions_table(found: list[WorkerInfo]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("SESSION", "WORKER", "EPOCH", "HELD FOR", "LEASE LEFT"):
        table.add_column(column)
    for info in found:
        for held in info.sessions:
            table.add_row(
                escape(held.session),
                escape(info.id),
                str(held.epoch),
                _age(held.held_for_s),
                _age(max(held.expires_in_s, 0.0)),
            )
    return table


def workers(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    sessions: Annotated[
        bool, typer.Option("--sessions", help="Also list every owned session with its lease.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One worker per line as JSON, with its sessions.")
    ] = False,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="Also list the workers stopped or lapsed more than an hour ago."
        ),
    ] = False,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Delete the rows of workers stopped or lapsed longer than --older-than ago "
            "(never a live worker's, nor one a lease, running task or running idempotency "
            "claim still names), instead of listing.",
        ),
    ] = False,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help=f"With --prune: how long gone (30m, 12h, 7d; default {DEFAULT_PRUNE_AGE}).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The workers sharing a PostgreSQL store: state, heartbeat age, sessions, lease ages and roles;
    with --prune, delete the rows of long-gone workers."""
    if older_than is not None and not prune:
        raise fail("--older-than goes with --prune: add --prune to delete old rows.", code=2)
    if prune and (sessions or show_all):
        raise fail("--prune deletes rows and lists none: leave out --sessions and --all.", code=2)
    age_s = parse_duration(older_than or DEFAULT_PRUNE_AGE, option="--older-than")
    url = _database_url(config, store)
    with reading_database(url) as reader:
        where = reader.where
    if prune:
        pruned = _on_database(url, where, _pruning(age_s, where))
        if as_json:
            document = {"removed": list(pruned.removed), "kept": [asdict(k) for k in pruned.kept]}
            out.print(json.dumps(document), markup=False, highlight=False)
        else:
            _print_pruned(pruned, older_than or DEFAULT_PRUNE_AGE)
        return
    found, roles = _on_database(url, where, _listing(where))
    shown = found if show_all else [info for info in found if _recent(info)]
    if as_json:
        for info in shown:
            document = worker_json(info, roles.get(info.id, ()))
            out.print(json.dumps(document), markup=False, highlight=False)
        return
    if not found:
        out.print(
            f"No worker has run on {escape(where)} yet. Start one with "
            "`wakeful run --store postgresql://…`."
        )
        return
    out.print(_workers_table(shown, roles))
    hidden = len(found) - len(shown)
    if hidden:
        out.print(
            f"{hidden} worker(s) stopped or lapsed more than an hour ago not shown: --all lists "
            f"them, --prune deletes those gone for more than {DEFAULT_PRUNE_AGE}."
        )
    if sessions:
        out.print()
        out.print(_sessions_table(shown))


def _listing(
    where: str,
) -> Callable[[_Pool], Awaitable[tuple[list[WorkerInfo], dict[str, tuple[str, ...]]]]]:
    """Reads the workers, and the roles each holds (by worker id)."""
    from ..store.postgres.leases import list_workers
    from ..store.postgres.roles import roles_by_owner

    async def read(pool: _Pool) -> tuple[list[WorkerInfo], dict[str, tuple[str, ...]]]:
        return await list_workers(pool, where), await roles_by_owner(pool, where)

    return read


def _recent(info: WorkerInfo) -> bool:
    return info.gone_for_s is None or info.gone_for_s < RECENT_S


def _pruning(age_s: float, where: str) -> Callable[[_Pool], Awaitable[PrunedWorkers]]:
    from ..store.postgres.leases import prune_workers

    def prune(pool: _Pool) -> Awaitable[PrunedWorkers]:
        return prune_workers(pool, where, older_than_s=age_s)

    return prune


def _print_pruned(pruned: PrunedWorkers, age: str) -> None:
    removed = ", ".join(pruned.removed)
    out.print(
        escape(
            f"Removed {len(pruned.removed)} worker(s) stopped or lapsed more than {age} ago"
            + (f": {removed}." if removed else ".")
        )
    )
    for kept in pruned.kept:
        names = [
            f"{count} {what}"
            for count, what in (
                (kept.leases, "unexpired lease(s)"),
                (kept.running_tasks, "running task(s)"),
                (kept.running_claims, "running idempotency claim(s)"),
            )
            if count
        ]
        out.print(escape(f"Kept {kept.id}: still named by {', '.join(names)}."))


def _database_url(config: Path | None, store: str | None) -> str:
    """The PostgreSQL URL of --store, or of the configuration's `[store] url`; a SQLite store is
    refused with what to give instead."""
    from ..config import load_config

    if config is not None and store is not None:
        raise fail(
            "Give either --config or --store, not both: --store names the database itself, "
            "--config the file that says where it is.",
            code=2,
        )
    if store is not None:
        location = store_location(store)
        if isinstance(location, str):
            return location
        raise fail(
            f"workers exist only on a PostgreSQL store; {location} is a SQLite file, which "
            "one process uses. Give the shared database with --store "
            "postgresql://USER@HOST:PORT/DATABASE.",
            code=2,
        )
    path = config or Path("wakeful.toml")
    if config is not None and not path.exists():
        raise fail(f"There is no configuration file at {path}. Pass the file `wakeful run` used.")
    try:
        settings = load_config(path).store
    except UserError as exc:
        raise fail(str(exc)) from exc
    if settings.url is None:
        raise fail(
            f"workers exist only on a PostgreSQL store; the configuration's store is the SQLite "
            f"file {settings.path}, which one process uses. Set `[store] url = "
            '"postgresql://USER@HOST:PORT/DATABASE"` in wakeful.toml, or give the database '
            "with --store postgresql://….",
            code=2,
        )
    return settings.url


def _on_database(url: str, where: str, read: Callable[[_Pool], Awaitable[T]]) -> T:
    """`read(pool)` on a one-connection pool of the database at `url`; a store problem ends
    the command with its message (exit 1)."""
    import anyio

    async def run() -> T:
        from psycopg_pool import AsyncConnectionPool, PoolTimeout

        pool = AsyncConnectionPool(
            url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=False
        )
        try:
            await pool.open(wait=True, timeout=10)
        except PoolTimeout as exc:
            await pool.close()
            raise StoreError(
                f"Could not connect to {where} within 10 s. Check that the server runs and "
                "accepts connections."
            ) from exc
        try:
            return await read(pool)
        finally:
            await pool.close()

    try:
        return anyio.run(run)
    except StoreError as exc:
        raise fail(str(exc)) from exc
