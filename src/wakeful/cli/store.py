"""Reading a runtime's store from the command line: which file, opened read-only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import StoreError, UserError
from .console import fail

if TYPE_CHECKING:
    from ..store.reader import StoreReader

InspectConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="The configuration file whose store to read (default: wakeful.toml).",
        dir_okay=False,
        show_default=False,
    ),
]
DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="The store file itself, instead of --config.", dir_okay=False),
]


def store_path_of(config: Path | None, db: Path | None) -> Path:
    """The store file an inspection command reads: --db, or the store of the configuration."""
    from ..config import load_config

    if config is not None and db is not None:
        raise fail(
            f"Give either --config ({config}) or --db ({db}), not both: --db names the store "
            "file itself, --config the file that says where it is.",
            code=2,
        )
    if db is not None:
        return db.expanduser()
    if config is not None and not config.exists():
        raise fail(
            f"There is no configuration file at {config}. Pass the file `wakeful run` used, or "
            "the store itself with --db PATH."
        )
    try:
        return load_config(config or Path("wakeful.toml")).store.path
    except UserError as exc:
        raise fail(str(exc)) from exc


@contextmanager
def reading_store(config: Path | None, db: Path | None) -> Iterator[StoreReader]:
    """Open the store read-only; any store problem ends the command with its message (exit 1).

    Opening never creates, upgrades or changes the file.
    """
    from ..store.sqlite import Store

    path = store_path_of(config, db)
    if path.is_dir():
        raise fail(
            f"{path} is a directory, not a store file. Give the file, e.g. {path}/wakeful.db."
        )
    if not path.exists():
        raise fail(
            f"There is no wakeful store at {path}: the runtime has not run yet with this store "
            "(it creates the file when it first starts). Start it with `wakeful run`, or point "
            "--config or --db at the store of a runtime that has run."
        )
    try:
        with Store.read_only(path) as reader:
            yield reader
    except StoreError as exc:
        raise fail(str(exc)) from exc
