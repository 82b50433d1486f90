"""Reading a runtime's store from the command line: which store (a SQLite file or a PostgreSQL
database), opened read-only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import StoreError, UserError
from ..store.urls import POSTGRES_SCHEMES
from .console import fail

if TYPE_CHECKING:
    from ..store.postgres.reader import PostgresReader
    from ..store.reader import StoreReader

    InspectedStore = StoreReader | PostgresReader
    """A store opened read-only by an inspection command: a SQLite file or a PostgreSQL
    database, with the same read methods."""

InspectConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="The store's configuration (default: wakeful.toml).",
        dir_okay=False,
        show_default=False,
    ),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="The store itself, instead of --config: its file, or its PostgreSQL database as "
        "postgresql://USER@HOST:PORT/DATABASE (default: the configuration's, "
        ".wakeful/wakeful.db).",
        show_default=False,
    ),
]
"""The one spelling of "which store" in every command that reads a store. Text, not a path, so
that a URL keeps its `//`."""
DbAliasOption = Annotated[
    Path | None,
    typer.Option("--db", hidden=True, dir_okay=False, help="The former spelling of --store."),
]
"""`--db`, the former spelling of `--store`, still accepted but no longer shown."""


def store_option(store: Path | None, db: Path | None) -> Path | None:
    """The store file named by `--store` or its former spelling `--db` (not both)."""
    if store is not None and db is not None:
        raise fail(
            f"Give the store file once, with --store ({store}); --db ({db}) is its former "
            "spelling.",
            code=2,
        )
    return store if store is not None else db


def given_store(store: str | None, db: Path | None) -> Path | str | None:
    """The store named on the command line, by `--store` (a path or a PostgreSQL URL) or its
    former spelling `--db` (not both); None when neither is given."""
    given = store_location(store) if store is not None else None
    if given is not None and db is not None:
        raise fail("Give the store once, with --store; --db is its former spelling.", code=2)
    given = given if given is not None else db
    return given.expanduser() if isinstance(given, Path) else given


def store_location_of(config: Path | None, store: str | None, db: Path | None = None) -> Path | str:
    """The store an inspection command reads: --store (or --db), or the store of the
    configuration; a path, or the URL of a PostgreSQL database."""
    from ..config import load_config

    given = given_store(store, db)
    if config is not None and given is not None:
        raise fail(
            f"Give either --config ({config}) or --store, not both: --store names the store "
            "itself, --config the file that says where it is.",
            code=2,
        )
    if given is not None:
        return given
    if config is not None and not config.exists():
        raise fail(
            f"There is no configuration file at {config}. Pass the file `wakeful run` used, or "
            "the store itself with --store PATH (or --store postgresql://…)."
        )
    try:
        configured = load_config(config or Path("wakeful.toml")).store
    except UserError as exc:
        raise fail(str(exc)) from exc
    return configured.url if configured.url is not None else configured.path


def store_location(text: str) -> Path | str:
    """What `--store TEXT` names: a PostgreSQL URL (kept as text), or a file path. Any other
    URL is a usage error; the message never repeats the URL, which may hold a password."""
    scheme, separator, _ = text.partition("://")
    if not separator:
        return Path(text).expanduser()
    if scheme.lower() not in POSTGRES_SCHEMES:
        raise fail(
            f"--store {scheme}://… is not a store wakeful can read: give the store's file "
            "(e.g. .wakeful/wakeful.db) or its PostgreSQL database as "
            "postgresql://USER@HOST:PORT/DATABASE.",
            code=2,
        )
    return text


@contextmanager
def reading_store(
    config: Path | None, store: str | None, db: Path | None = None
) -> Iterator[StoreReader]:
    """Open a SQLite store file read-only; any store problem ends the command with its message
    (exit 1). For commands that read a SQLite file only; :func:`reading_any_store` also opens
    a PostgreSQL database.

    `store` is `--store`, `db` its former spelling `--db`. Opening never creates, upgrades or
    changes the file.
    """
    location = store_location_of(config, store, db)
    if isinstance(location, str):
        raise fail(
            f"This command reads a store file only, and {_database_name(location)} is a "
            "PostgreSQL database. Give the store's file with --store PATH.",
            code=2,
        )
    with _reading_file(location) as reader:
        yield reader


@contextmanager
def reading_any_store(
    config: Path | None, store: str | None, db: Path | None = None
) -> Iterator[InspectedStore]:
    """Open the store read-only, a SQLite file or a PostgreSQL database (`--store
    postgresql://…`); any store problem ends the command with its message (exit 1).

    `store` is `--store`, `db` its former spelling `--db`. Opening never creates, upgrades or
    changes the store.
    """
    location = store_location_of(config, store, db)
    if isinstance(location, str):
        with reading_database(location) as database:
            yield database
        return
    with _reading_file(location) as reader:
        yield reader


@contextmanager
def reading_database(url: str) -> Iterator[PostgresReader]:
    """Open the wakeful store in the PostgreSQL database at `url` read-only; any problem (no
    driver, no server, no store there) ends the command with its message (exit 1)."""
    try:
        from ..store.postgres.reader import open_postgres_reader
    except ImportError as exc:
        raise fail(
            f"Reading a PostgreSQL store needs the psycopg driver, which is missing ({exc}). "
            "Install it with: pip install 'wakeful[postgres]'."
        ) from exc
    try:
        reader = open_postgres_reader(url)
    except (StoreError, UserError) as exc:
        raise fail(str(exc)) from exc
    try:
        with reader:
            yield reader
    except StoreError as exc:
        raise fail(str(exc)) from exc


def store_name(reader: InspectedStore) -> str:
    """How messages name the store read: its file, or its database and host (never a
    password)."""
    from ..store.reader import StoreReader

    return str(reader.path) if isinstance(reader, StoreReader) else reader.where


def _database_name(url: str) -> str:
    try:
        from ..store.postgres.access import database_name

        return database_name(url)
    except (ImportError, UserError):
        return "the store URL"


@contextmanager
def _reading_file(path: Path) -> Iterator[StoreReader]:
    from ..store.sqlite import Store

    if path.is_dir():
        raise fail(
            f"{path} is a directory, not a store file. Give the file, e.g. {path}/wakeful.db.",
            code=2,
        )
    if not path.exists():
        raise fail(
            f"There is no wakeful store at {path}: the runtime has not run yet with this store "
            "(it creates the file when it first starts). Start it with `wakeful run` or "
            "`wakeful demo async`, or point --config or --store at the store of a runtime that "
            "has run."
        )
    try:
        with Store.read_only(path) as reader:
            yield reader
    except StoreError as exc:
        raise fail(str(exc)) from exc
