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
        help="The store's configuration (default: wakeful.toml).",
        dir_okay=False,
        show_default=False,
    ),
]
StoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="The store file itself, instead of --config (default: the configuration's, "
        ".wakeful/wakeful.db).",
        dir_okay=False,
        show_default=False,
    ),
]
"""The one spelling of "which store file" in every command that reads a store."""
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


def store_path_of(config: Path | None, store: Path | None) -> Path:
    """The store file an inspection command reads: --store, or the store of the configuration."""
    from ..config import load_config

    if config is not None and store is not None:
        raise fail(
            f"Give either --config ({config}) or --store ({store}), not both: --store names the "
            "store file itself, --config the file that says where it is.",
            code=2,
        )
    if store is not None:
        return store.expanduser()
    if config is not None and not config.exists():
        raise fail(
            f"There is no configuration file at {config}. Pass the file `wakeful run` used, or "
            "the store itself with --store PATH."
        )
    try:
        return load_config(config or Path("wakeful.toml")).store.path
    except UserError as exc:
        raise fail(str(exc)) from exc


@contextmanager
def reading_store(
    config: Path | None, store: Path | None, db: Path | None = None
) -> Iterator[StoreReader]:
    """Open the store read-only; any store problem ends the command with its message (exit 1).

    `store` is `--store`, `db` its former spelling `--db`. Opening never creates, upgrades or
    changes the file.
    """
    from ..store.sqlite import Store

    path = store_path_of(config, store_option(store, db))
    if path.is_dir():
        raise fail(
            f"{path} is a directory, not a store file. Give the file, e.g. {path}/wakeful.db."
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
