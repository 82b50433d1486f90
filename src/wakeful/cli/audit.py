"""`wakeful audit`: per-tool statistics and a JSONL export of the audit log of a store.

Both commands open the store read-only, so they work while a runtime is writing to it and never
create, upgrade or change the file.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from .console import err, fail, out
from .durations import duration_seconds
from .store import DbAliasOption, InspectConfigOption, StoreOption, reading_any_store, store_name

__all__ = ["audit_app", "parse_since", "register"]

audit_app = typer.Typer(
    help="Read the audit log: every tool call, its safety decisions, status and duration.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only calls since then: a duration back from now (30m, 24h, 7d, 2w) or an ISO "
        "time (2025-06-02T07:00Z).",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    """Add the `audit` command group to the `wakeful` app."""
    app.add_typer(audit_app, name="audit")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """The UTC time `text` names: a duration back from `now` or an ISO time (naive means UTC)."""
    seconds = duration_seconds(text)
    if seconds is not None:
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither a duration nor an ISO time. Give a duration back from now such "
            "as 30m, 24h, 7d or 2w, or a time such as 2025-06-02 or 2025-06-02T07:00Z.",
            param_hint="--since",
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


@audit_app.command("stats")
def stats_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    since: SinceOption = None,
    db: DbAliasOption = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='One JSON object: {"since", "tools": {name: {...}}}.'),
    ] = False,
) -> None:
    """Per tool: calls, errors, error rate, timeouts, denials and p50/p95 durations."""
    from ..safety.audit import stats

    start = parse_since(since) if since is not None else None
    with reading_any_store(config, store, db) as reader:
        rows = stats(reader, since=start)
        if as_json:
            body: dict[str, Any] = {
                "since": start.isoformat() if start else None,
                "tools": {row.tool: row.to_json() for row in rows},
            }
            sys.stdout.write(json.dumps(body, ensure_ascii=False) + "\n")
            return
        if not rows:
            when = f" since {start.isoformat(timespec='seconds')}" if start else ""
            out.print(f"[dim]No audited calls{when} in {escape(store_name(reader))}.[/dim]")
            return
        table = Table(title="Tool calls" + (f" since {start:%Y-%m-%d %H:%M} UTC" if start else ""))
        # Tool names are what the reader scans for: never cut them, shrink the numbers instead.
        table.add_column("tool", no_wrap=True, min_width=max(len(row.tool) for row in rows))
        for header in ("calls", "errors", "error rate", "timeouts", "denied"):
            table.add_column(header, justify="right")
        table.add_column("p50 ms", justify="right")
        table.add_column("p95 ms", justify="right")
        for row in rows:
            table.add_row(
                escape(row.tool),
                str(row.calls),
                str(row.errors),
                f"{row.error_rate:.1%}",
                str(row.timeouts),
                str(row.denied),
                _ms(row.p50_ms),
                _ms(row.p95_ms),
            )
        out.print(table)


@audit_app.command("export")
def export_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    since: SinceOption = None,
    db: DbAliasOption = None,
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Only this session.", show_default=False)
    ] = None,
    tool: Annotated[
        str | None, typer.Option("--tool", "-t", help="Only this tool.", show_default=False)
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file instead of standard output.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write the audited calls, oldest first, as JSON lines (secrets already redacted)."""
    from ..safety.audit import export_jsonl

    start = parse_since(since) if since is not None else None
    with reading_any_store(config, store, db) as reader:

        async def export() -> int:
            if output is None:
                count = await export_jsonl(
                    reader, sys.stdout, since=start, session=session, tool=tool
                )
                sys.stdout.flush()
                return count
            with output.open("w", encoding="utf-8") as out:
                return await export_jsonl(reader, out, since=start, session=session, tool=tool)

        try:
            count = anyio.run(export)
        except OSError as exc:
            raise fail(
                f"Cannot write the export to {output}: {exc.strerror or exc}. Choose a file in "
                "an existing, writable directory."
            ) from exc
    if output is not None:
        err.print(f"Wrote {count} audited call(s) to {escape(str(output))}.")
