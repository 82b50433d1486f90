"""A real PostgreSQL server in a temporary directory, for the PostgreSQL store's tests.

PostgreSQL is Debian's `postgresql` package (`scripts/test` installs it): `initdb` makes a fresh
cluster in a directory of its own under the system's temp dir (not under pytest's, which is
private to root and closed to the `postgres` user), and `pg_ctl` starts it listening on a unix
socket in that directory only (no TCP port, so nothing outside this machine can reach it and no
port can clash). PostgreSQL refuses to run as root, so when the tests run as root both run as the
`postgres` user (`runuser -u postgres --`). Durability is switched off (`fsync=off`): a test
server never survives a power cut, and it makes CREATE DATABASE and commits fast.

One server is started per test session (:func:`postgres_server`); every test gets a fresh,
empty database on it (:func:`postgres_url`), dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from wakeful.core.runtime_store import RuntimeStore

import pytest

__all__ = [
    "PostgresServer",
    "RuntimeStoreUnderTest",
    "postgres_missing",
    "postgres_server",
    "postgres_url",
    "runtime_store",
    "start_postgres",
]

INSTALL_HINT = "apt-get install postgresql"
START_TIMEOUT_S = 30


def _tool(name: str) -> str | None:
    """The path of a PostgreSQL program: on PATH, or in Debian's versioned folder."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(versions[-1]) if versions else None


def postgres_missing() -> str | None:
    """Why the tests cannot start PostgreSQL here, or None when they can."""
    for name in ("initdb", "pg_ctl"):
        if _tool(name) is None:
            return f"PostgreSQL's {name} is not on PATH nor in /usr/lib/postgresql: {INSTALL_HINT}"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "the tests run as root and `runuser` is missing to start PostgreSQL as `postgres`"
    return None


def _as_server_user(command: list[str]) -> list[str]:
    """`command` run as the `postgres` user when we are root (PostgreSQL refuses root)."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class PostgresServer:
    """A running PostgreSQL cluster; see the module docs."""

    root: Path
    _names: Iterator[int]

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root

    def url(self, database: str = "postgres") -> str:
        """The connection URL of `database` on this server (through its unix socket)."""
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def create_database(self) -> str:
        """Create a fresh, empty database and return its name."""
        import psycopg

        name = f"wakeful_test_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def start(self) -> None:
        """Start the server on its data directory (again, after :meth:`halt`)."""
        pg_ctl = _tool("pg_ctl")
        assert pg_ctl is not None, postgres_missing()
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        command = [pg_ctl, "start", "-D", str(self.data_dir), "-o", options]
        log = self.root / "postgres.log"
        command += ["-l", str(log), "-w", "-t", str(START_TIMEOUT_S)]
        try:
            subprocess.run(
                _as_server_user(command),
                check=True,
                capture_output=True,
                timeout=START_TIMEOUT_S + 10,
            )
        except subprocess.CalledProcessError as exc:
            detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"PostgreSQL did not start: {exc.stderr.decode(errors='replace')}{detail}"
            ) from exc

    def halt(self) -> None:
        """Stop the server (fast shutdown: clients are disconnected), keeping its data."""
        pg_ctl = _tool("pg_ctl")
        if pg_ctl is not None and (self.data_dir / "postmaster.pid").exists():
            subprocess.run(
                _as_server_user([pg_ctl, "stop", "-D", str(self.data_dir), "-m", "fast", "-w"]),
                check=False,
                capture_output=True,
                timeout=START_TIMEOUT_S,
            )

    def stop(self) -> None:
        """Stop the server and delete its files."""
        self.halt()
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """Initialise and start a fresh cluster in a new temp dir; see the module docs."""
    initdb = _tool("initdb")
    assert initdb is not None, postgres_missing()
    root = Path(tempfile.mkdtemp(prefix="wakeful-postgres-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    server = PostgresServer(root, itertools.count(1))
    command = [initdb, "-D", str(server.data_dir), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
    try:
        subprocess.run(_as_server_user(command), check=True, capture_output=True, timeout=120)
        server.start()
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the test session; skipped, with the command that installs it,
    where PostgreSQL or psycopg is missing."""
    pytest.importorskip("psycopg", reason="psycopg is missing: pip install -e '.[postgres]'")
    missing = postgres_missing()
    if missing:
        pytest.skip(missing)
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database on the session's server, dropped after the test."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.drop_database(name)


@dataclass(frozen=True)
class RuntimeStoreUnderTest:
    """Where a runtime under test keeps its state (:func:`runtime_store`): a SQLite file or a
    fresh PostgreSQL database. `location` is the file's path or the database's URL, as a child
    process gets it on its command line (a `://` in it means a URL)."""

    backend: Literal["sqlite", "postgres"]
    location: str

    @property
    def options(self) -> dict[str, Any]:
        """`Runtime`'s keyword argument for this store: `store_path` or `store_url`."""
        if self.backend == "postgres":
            return {"store_url": self.location}
        return {"store_path": Path(self.location)}

    @asynccontextmanager
    async def open(self) -> AsyncIterator[RuntimeStore]:
        """The store itself, opened the way the runtime opens it: to set up what a killed
        runtime left, or to check what a runtime stored."""
        if self.backend == "postgres":
            from wakeful.store.postgres import PostgresStore

            async with await PostgresStore.open(self.location) as store:
                yield store
        else:
            from wakeful.store.sqlite import Store

            async with await Store.open(self.location) as sqlite_store:
                yield sqlite_store


@pytest.fixture(params=["sqlite", "postgres"])
def runtime_store(request: pytest.FixtureRequest, tmp_path: Path) -> RuntimeStoreUnderTest:
    """The test's runtime store on each backend in turn: a SQLite file under `tmp_path`, then a
    fresh database on the session's PostgreSQL server (skipped where PostgreSQL is missing)."""
    if request.param == "postgres":
        return RuntimeStoreUnderTest("postgres", request.getfixturevalue("postgres_url"))
    return RuntimeStoreUnderTest("sqlite", str(tmp_path / "wakeful.db"))
