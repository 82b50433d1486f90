"""`wakeful doctor`: is this store healthy, and can this machine run the runtime?

Each check is one finding (OK, WARN or FAIL) whose message says what to do; the command exits 1
when anything FAILs. The store is only read (never locked, created, upgraded or changed), so the
doctor can look at the store of a running runtime.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, Literal

import typer
from rich.markup import escape

from ..errors import StoreError, UserError
from .console import fail, out
from .store import DbAliasOption, given_store

if TYPE_CHECKING:
    from ..config import WakefulConfig

__all__ = ["Finding", "check_model_endpoint", "check_store", "register"]

Status = Literal["ok", "warn", "fail"]

_STYLES: Final = {"ok": "bold green", "warn": "bold yellow", "fail": "bold red"}
# Free space below which the store cannot be trusted to take its next writes.
_FREE_FAIL_BYTES: Final = 64 * 1024 * 1024
_FREE_WARN_BYTES: Final = 1024 * 1024 * 1024
_WAL_WARN_BYTES: Final = 256 * 1024 * 1024
_ENDPOINT_TIMEOUT_S: Final = 3.0
_DEFAULT_ENDPOINTS: Final = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}


@dataclass(frozen=True)
class Finding:
    """One check's outcome: `check` names it, `message` says what was found and what to do."""

    check: str
    status: Status
    message: str


def register(app: typer.Typer) -> None:
    """Add the `doctor` command to the `wakeful` application."""
    app.command("doctor", help="Check a store and this machine; say what to fix.")(doctor)


def doctor(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="The configuration whose store and model to check (default: wakeful.toml).",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="The store to check, instead of the config's: its file, or its PostgreSQL "
            "database as postgresql://USER@HOST:PORT/DATABASE.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    db: DbAliasOption = None,
) -> None:
    """Check a store (read-only) and the machine: sandbox, disk space, model endpoint."""
    given = given_store(store, db)
    cfg = _load_config(config)
    if given is None and cfg is None:
        raise fail(
            "There is no store to check: give the store file with --store PATH, or the "
            "configuration that names it with --config PATH (no wakeful.toml here).",
            code=2,
        )
    location: Path | str
    if given is not None:
        location = given
    else:
        assert cfg is not None
        location = cfg.store.url if cfg.store.url is not None else cfg.store.path
    if isinstance(location, Path):
        path = location
        findings = [*check_store(path), _check_sandbox(), _check_disk(path)]
        where = str(path)
    else:
        findings = [check_database(location), _check_sandbox()]
        where = _database_words(location)
    findings.append(
        check_model_endpoint(_endpoint_of(cfg))
        if cfg is not None and cfg.model is not None
        else Finding("model", "ok", "Not checked: no [model] is configured.")
    )
    failed = any(f.status == "fail" for f in findings)
    if as_json:
        document = {"store": where, "ok": not failed, "findings": [asdict(f) for f in findings]}
        out.print_json(json.dumps(document))
    else:
        for finding in findings:
            style = _STYLES[finding.status]
            out.print(
                f"[{style}]{finding.status.upper():<4}[/{style}] {escape(finding.check)}: "
                f"{escape(finding.message)}"
            )
    if failed:
        raise typer.Exit(1)


def _load_config(config: Path | None) -> WakefulConfig | None:
    from ..config import load_config

    if config is None:
        default = Path("wakeful.toml")
        if not default.is_file():
            return None
        config = default
    if not config.exists():
        raise fail(
            f"There is no configuration file at {config}. Give the one `wakeful run` uses, or "
            "the store itself with --store PATH.",
            code=2,
        )
    try:
        return load_config(config)
    except UserError as exc:
        raise fail(str(exc), code=2) from exc


# --- the store -----------------------------------------------------------------------------------


def check_database(url: str) -> Finding:
    """The finding about the wakeful store in the PostgreSQL database at `url`, read without
    changing it (its free space is the database server's to watch)."""
    try:
        from ..store.postgres.reader import open_postgres_reader
    except ImportError as exc:
        return Finding(
            "store",
            "fail",
            f"Checking a PostgreSQL store needs the psycopg driver, which is missing ({exc}). "
            "Install it with: pip install 'wakeful[postgres]'.",
        )
    try:
        with open_postgres_reader(url) as reader:
            counts = reader.event_counts_by_channel()
    except (StoreError, UserError) as exc:
        # One line: the driver's message may span several.
        return Finding("store", "fail", " ".join(str(exc).split()))
    events = sum(sum(by_status.values()) for by_status in counts.values())
    return Finding(
        "store",
        "ok",
        f"{_database_words(url)} holds a wakeful store this wakeful can run on ({events:,} "
        "events stored).",
    )


def _database_words(url: str) -> str:
    """The database of `url` in words (its name and host, never a password)."""
    try:
        from ..store.postgres.access import database_name
    except ImportError:  # no driver: the finding says so
        return "the PostgreSQL database"
    try:
        return database_name(url)
    except UserError:
        return "the PostgreSQL database (its URL cannot be read)"


def check_store(path: Path) -> list[Finding]:
    """Findings about the store file at `path`, read without changing it."""
    from ..store.opening import SQLITE_MAGIC

    if path.is_dir():
        return [
            Finding(
                "store",
                "fail",
                f"{path} is a directory, not a store file. Give the file, e.g. "
                f"{path / 'wakeful.db'}.",
            )
        ]
    if not path.exists():
        return [
            Finding(
                "store",
                "fail",
                f"There is no store at {path}. Check the path; a runtime creates it when it "
                "first starts (`wakeful run`).",
            )
        ]
    try:
        with path.open("rb") as file:
            header = file.read(100)
    except OSError as exc:
        return [
            Finding(
                "store",
                "fail",
                f"Cannot read {path}: {exc.strerror or exc}. This is a permission problem, not "
                "damage: run as the user who owns it, or make it readable.",
            )
        ]
    if not header:
        return [
            Finding(
                "store",
                "fail",
                f"{path} is an empty file (0 bytes): the store was probably truncated and its "
                "data is not in it. Restore it from a backup; delete the file only to start over.",
            )
        ]
    if not header.startswith(SQLITE_MAGIC):
        return [
            Finding(
                "store",
                "fail",
                f"{path} is not a SQLite database (it begins with {header[:16]!r}), so not a "
                "wakeful store. Check the path; if it was your store, try `sqlite3 "
                f"{path} .recover` on a copy.",
            )
        ]
    findings = _schema_findings(path)
    if any(f.status == "fail" for f in findings):
        return findings
    findings.append(_integrity(path))
    findings.append(_sizes(path))
    findings.append(_holder(path))
    findings.append(_writable(path))
    return findings


def _schema_findings(path: Path) -> list[Finding]:
    from ..store.opening import connect_query_only
    from ..store.schema import MIGRATIONS, read_only_mode, read_schema_version

    try:
        conn = connect_query_only(path, read_only_mode(path))
        try:
            version = read_schema_version(conn, path)
        finally:
            conn.close()
    except StoreError as exc:
        return [Finding("schema", "fail", str(exc))]
    except sqlite3.Error as exc:
        return [
            Finding(
                "schema",
                "fail",
                f"SQLite cannot read the schema of {path}: {exc}. The file is damaged; copy it "
                f"aside and recover what is readable with `sqlite3 {path} .recover`.",
            )
        ]
    known = len(MIGRATIONS)
    if version > known:
        return [
            Finding(
                "schema",
                "fail",
                f"Schema version {version}, written by a newer wakeful; this one understands up "
                f"to {known}. Upgrade wakeful.",
            )
        ]
    if version == 0:
        return [
            Finding(
                "schema",
                "warn",
                "An empty SQLite database without wakeful tables; a runtime would make it a new "
                "store. Check that this is the path you meant.",
            )
        ]
    if version < known:
        return [
            Finding(
                "schema",
                "warn",
                f"Schema version {version}; this wakeful uses {known} and upgrades the store the "
                "next time a runtime starts on it (keeping its data).",
            )
        ]
    return [Finding("schema", "ok", f"Schema version {version}, the current one.")]


def _integrity(path: Path) -> Finding:
    from ..store.opening import quick_check

    started = time.perf_counter()
    problems = quick_check(path)
    took = time.perf_counter() - started
    if problems:
        shown = "; ".join(problems[:3])
        return Finding(
            "integrity",
            "fail",
            f"PRAGMA quick_check found damage: {shown}. Stop any runtime on it, keep the file, "
            f"and recover a copy with `sqlite3 {path} .recover | sqlite3 recovered.db`; then "
            "point wakeful at recovered.db (or restore a backup).",
        )
    return Finding("integrity", "ok", f"PRAGMA quick_check passed ({took:.2f} s).")


def _sizes(path: Path) -> Finding:
    size = path.stat().st_size
    wal = path.with_name(path.name + "-wal")
    wal_size = wal.stat().st_size if wal.exists() else 0
    text = f"{_bytes(size)}, WAL {_bytes(wal_size)}."
    if wal_size > _WAL_WARN_BYTES:
        return Finding(
            "size",
            "warn",
            f"{text} The WAL is large: a long-lived reader (e.g. `wakeful events tail "
            "--follow`) keeps it from being checkpointed; stop it, or restart the runtime.",
        )
    return Finding("size", "ok", text)


def _holder(path: Path) -> Finding:
    from ..store.lock import lock_is_held, read_holder

    holder = read_holder(path)
    held = lock_is_held(path)
    if held:
        who = holder.describe() if holder else "a process that left no record"
        return Finding("lock", "ok", f"In use by a runtime: {who}.")
    if held is None:
        return Finding(
            "lock",
            "warn",
            f"Cannot tell whether a runtime uses the store ({path}.lock unreadable).",
        )
    if holder is None:
        return Finding("lock", "ok", "Not in use; no runtime has locked it yet.")
    if holder.state == "clean":
        return Finding(
            "lock", "ok", f"Not in use; the last runtime ({holder.describe()}) closed it cleanly."
        )
    return Finding(
        "lock",
        "warn",
        f"Not in use, but the last runtime ({holder.describe()}) did not shut down cleanly; "
        "the next start re-runs the integrity check. Nothing to do if the check above passed.",
    )


def _writable(path: Path) -> Finding:
    if not os.access(path, os.R_OK | os.W_OK):
        return Finding(
            "permissions",
            "warn",
            f"This user cannot write {path}, so a runtime (run as this user) cannot open it. The "
            "data is not affected: make the file writable or run as its owner.",
        )
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return Finding(
            "permissions",
            "warn",
            f"This user cannot write the folder {path.parent}, where a runtime creates its lock "
            "and WAL files. The data is not affected: make the folder writable or run as its "
            "owner.",
        )
    return Finding("permissions", "ok", "The store and its folder are writable by this user.")


# --- the machine ---------------------------------------------------------------------------------


def _check_sandbox() -> Finding:
    from ..safety.sandbox.bwrap import bwrap_features

    features = bwrap_features()
    if features is None:
        return Finding(
            "sandbox",
            "warn",
            "bubblewrap is missing or cannot create namespaces here, so shell commands cannot be "
            "sandboxed. Install bubblewrap (`apt install bubblewrap`) and allow unprivileged "
            "user namespaces, or run the runtime where they are allowed.",
        )
    missing = features.missing()
    if missing:
        return Finding(
            "sandbox",
            "warn",
            f"bubblewrap works, with gaps: {', '.join(missing)}. Commands are sandboxed less "
            "strictly; allow user namespaces and seccomp in the container to close them.",
        )
    return Finding("sandbox", "ok", "bubblewrap works with every feature.")


def _check_disk(path: Path) -> Finding:
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        return Finding("disk", "warn", f"Cannot tell the free space in {folder}: {exc}.")
    text = f"{_bytes(free)} free in {folder}."
    if free < _FREE_FAIL_BYTES:
        return Finding("disk", "fail", f"{text} The store's next writes may fail: free some space.")
    if free < _FREE_WARN_BYTES:
        return Finding("disk", "warn", f"{text} Free some space before the store grows.")
    return Finding("disk", "ok", text)


def _endpoint_of(cfg: WakefulConfig) -> str:
    assert cfg.model is not None
    return cfg.model.base_url or _DEFAULT_ENDPOINTS[cfg.model.provider]


def check_model_endpoint(url: str, timeout: float = _ENDPOINT_TIMEOUT_S) -> Finding:
    """Whether the model endpoint at `url` answers HTTP at all (any status counts)."""
    import httpx2

    started = time.perf_counter()
    try:
        with httpx2.Client(timeout=timeout, follow_redirects=False) as client:
            response = client.get(url)
    except httpx2.TimeoutException:
        return Finding(
            "model",
            "fail",
            f"{url} did not answer within {timeout:g} s. Check that the model server is up and "
            "the base_url in the configuration is right.",
        )
    except httpx2.HTTPError as exc:
        return Finding(
            "model",
            "fail",
            f"Cannot reach {url}: {exc or type(exc).__name__}. Start the model server, or fix "
            "base_url in the configuration.",
        )
    took = (time.perf_counter() - started) * 1000
    return Finding("model", "ok", f"{url} answered (HTTP {response.status_code}) in {took:.0f} ms.")


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
