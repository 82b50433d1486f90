"""`wakeful workers`: the workers sharing a PostgreSQL store, and the sessions each owns.

A worker is *live* while it renews its heartbeat, *stopped* once it shut down cleanly (its
sessions were released), and *lapsed* when its heartbeat is older than its lease time: it died,
froze or lost the database, and its sessions are being (or were) taken over by live workers.
Ages are measured by the database's clock, so they are right whatever the clocks of the
machines running the workers say. The command only reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import StoreError, UserError
from .console import fail, out
from .store import InspectConfigOption, StoreOption, reading_database, store_location

if TYPE_CHECKING:
    from ..store.postgres.leases import WorkerInfo

__all__ = ["register", "worker_json", "worker_state"]

_SESSIONS_SHOWN = 3


def register(app: typer.Typer) -> None:
    """Add the `workers` command to the `wakeful` app."""
    app.command("workers")(workers)


def worker_state(info: WorkerInfo) -> str:
    """live, stopped (shut down cleanly) or lapsed (its heartbeat is older than its lease)."""
    if info.stopped_at is not None:
        return "stopped"
    return "live" if info.alive else "lapsed"


def worker_json(info: WorkerInfo) -> dict[str, Any]:
    """One worker as `--json` prints it."""
    return {
        "worker": info.id,
        "host": info.host,
        "pid": info.pid,
        "state": worker_state(info),
        "started_at": info.started_at.isoformat(),
        "stopped_at": None if info.stopped_at is None else info.stopped_at.isoformat(),
        "heartbeat_age_s": round(info.heartbeat_age_s, 3),
        "sessions": [
            {
                "session": held.session,
                "epoch": held.epoch,
                "held_for_s": round(held.held_for_s, 3),
                "expires_in_s": round(held.expires_in_s, 3),
            }
            for held in info.sessions
        ],
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


def _workers_table(found: list[WorkerInfo]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("WORKER", "HOST", "PID", "STATE", "HEARTBEAT", "SESSIONS", "LONGEST HELD"):
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
) -> None:
    """The workers sharing a PostgreSQL store: state, heartbeat age, sessions and lease ages."""
    url = _database_url(config, store)
    with reading_database(url) as reader:
        try:
            found = _list_workers(url, reader.where)
        except StoreError as exc:
            raise fail(str(exc)) from exc
    if as_json:
        for info in found:
            out.print(json.dumps(worker_json(info)), markup=False, highlight=False)
        return
    if not found:
        out.print(
            f"No worker has run on {escape(reader.where)} yet. Start one with "
            "`wakeful run --store postgresql://…`."
        )
        return
    out.print(_workers_table(found))
    if sessions:
        out.print()
        out.print(_sessions_table(found))


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


def _list_workers(url: str, where: str) -> list[WorkerInfo]:
    import anyio

    from ..store.postgres.leases import list_workers

    async def read() -> list[WorkerInfo]:
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
            return await list_workers(pool, where)
        finally:
            await pool.close()

    return anyio.run(read)
