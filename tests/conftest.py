"""Test-suite settings: no real model requests, anyio on asyncio; the fixtures of a real
PostgreSQL server (tests/servers/postgres.py), and `open_store`/`write_raw`, the store of a test
on each backend in turn (tests/store and tests/channels use them)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import wakeful.models.guard as guard

# Imported here only, for the whole suite: a module that imported them again would hold a second
# session-scoped server fixture, and start a second PostgreSQL server.
from servers.postgres import postgres_server, postgres_url, runtime_store  # noqa: F401

guard.ALLOW_MODEL_REQUESTS = False

# pytest-xdist's workers start with COLUMNS=80 in their environment, which rich reads once, when
# the CLI's consoles are made at import: every table would then be 80 columns wide whatever width
# a test asks for (CliRunner's env). Without it, the width is read at each print.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Paths beneath a root resolved as the kernel allows (openat2), and by the fallback walk."""
    from wakeful.safety import beneath

    if request.param == "openat2" and not beneath.openat2_available():
        pytest.skip("this kernel has no openat2")
    monkeypatch.setattr(beneath, "use_openat2", request.param == "openat2")
    return str(request.param)


# `open_store`'s value and `write_raw`'s; tests/store/store_records.py names them with the
# store's interface (OpenStore, WriteRaw).
AnyOpenStore = Callable[[], AbstractAsyncContextManager[Any]]
AnyWriteRaw = Callable[[str, tuple[Any, ...]], Awaitable[None]]


def _sqlite_store_path(tmp_path: Path) -> Path:
    """Where `open_store` keeps the SQLite store, in a folder of its own under `tmp_path`."""
    return tmp_path / "state" / "wakeful.db"


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AnyOpenStore:
    """Opens the test's store (the same file or database each time), as `async with`: the
    SQLite store on a file, then the PostgreSQL store on a fresh database of a real server
    (skipped where PostgreSQL is missing)."""
    if request.param == "sqlite":
        from wakeful.store.sqlite import Store

        path = _sqlite_store_path(tmp_path)

        @asynccontextmanager
        async def open_sqlite() -> AsyncIterator[Any]:
            async with await Store.open(path) as store:
                yield store

        return open_sqlite

    url: str = request.getfixturevalue("postgres_url")
    from wakeful.store.postgres import PostgresStore

    @asynccontextmanager
    async def open_postgres() -> AsyncIterator[Any]:
        async with await PostgresStore.open(url) as store:
            yield store

    return open_postgres


@pytest.fixture
def write_raw(request: pytest.FixtureRequest, tmp_path: Path) -> AnyWriteRaw:
    """Runs one SQL statement (with %s placeholders) on the test's store (`open_store`'s) behind
    its back, as a person editing the database by hand would: on the SQLite file, or on the
    PostgreSQL database. Use it while the store is closed."""
    backend = request.node.callspec.params["open_store"]

    async def write(sql: str, params: tuple[Any, ...]) -> None:
        if backend == "sqlite":
            conn = sqlite3.connect(_sqlite_store_path(tmp_path))
            try:
                conn.execute(sql.replace("%s", "?"), params)
                conn.commit()
            finally:
                conn.close()
            return
        import psycopg

        url: str = request.getfixturevalue("postgres_url")
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as database:
            await database.execute(sql.encode(), params)

    return write
