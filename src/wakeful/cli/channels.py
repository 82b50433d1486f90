"""`wakeful channels`: the event channels of the configuration and those the agent connected,
checked and counted without a running runtime (it reads wakeful.toml and the store)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from ..errors import UserError
from .console import fail, out
from .store import InspectConfigOption, StoreOption, reading_database, store_location

if TYPE_CHECKING:
    from rich.table import Table

    from ..config import WakefulConfig
    from ..core.records import ConnectedChannel

__all__ = ["channels_command", "register"]


def register(app: typer.Typer) -> None:
    """Add `channels` to the `wakeful` application."""
    app.command("channels")(channels_command)


def channels_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One channel per line as JSON.")] = False,
) -> None:
    """List the event channels: those of wakeful.toml (checked against their kind, so a bad
    table shows here before `wakeful run` refuses it) and those the agent connected, with how
    many events each stored and filtered, and its cursors. Exits with 1 when a configured
    channel is invalid."""
    from ..config import load_config

    config_path = config or Path("wakeful.toml")
    if config is not None and not config.exists():
        raise fail(f"There is no configuration file at {config}. Pass the file `wakeful run` uses.")
    try:
        loaded = load_config(config_path)
    except UserError as exc:
        raise fail(str(exc)) from exc
    rows = _configured(loaded)
    configured = loaded.store.url if loaded.store.url is not None else loaded.store.path
    location = store_location(store) if store is not None else configured
    note = _add_stored(rows, location)
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
        if any(row["problem"] for row in rows):
            raise typer.Exit(1)
        return
    problems = [row for row in rows if row["problem"]]
    if rows:
        out.print(_table(rows))
        for row in problems:
            out.print(row["problem"], style="red", markup=False, emoji=False)
    else:
        out.print(
            f"[dim]No channels: {escape(str(config_path))} declares no [[channels.<kind>]] "
            "table, and the agent connected none.[/dim]"
        )
    if note:
        out.print(f"[dim]{escape(note)}[/dim]")
    if problems:
        raise typer.Exit(1)


def _configured(config: WakefulConfig) -> list[dict[str, Any]]:
    from ..channels.registry import ChannelSpec, validated_filter, validated_settings

    rows = []
    for kind_name, tables in config.channels.items():
        for table in tables:
            spec = ChannelSpec(kind_name, table.name, table.settings, table.filter, table.origin)
            problems = []
            try:
                validated_filter(spec.filter, spec.origin)
            except UserError as exc:
                problems.append(str(exc))
            try:
                validated_settings(spec.kind_in(), spec.settings, spec.origin)
            except UserError as exc:
                problems.append(str(exc))
            problem = " ".join(problems)
            rows.append(_row(spec.full_name, kind_name, "configured", table.filter, problem))
    return rows


def _row(name: str, kind: str, origin: str, filter: dict[str, Any], problem: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "origin": origin,
        "filter": filter,
        "problem": problem,
        "stored": 0,
        "filtered": 0,
        "cursors": {},
    }


def _add_stored(rows: list[dict[str, Any]], location: Path | str) -> str:
    """Add the store's connected channels, counts and cursors to `rows` (from its file, or from
    the PostgreSQL database `location` is the URL of); a note when a store file cannot say (not
    created yet)."""
    from ..errors import StoreError
    from ..store.sqlite import Store

    if isinstance(location, str):
        with reading_database(location) as database:
            connected = database.connected_channels()
            counts = database.event_counts_by_channel()
            cursors = database.channel_cursors()
        _merge_stored(rows, connected, counts, cursors)
        return ""
    path = location
    if not path.exists():
        return f"No store at {path} yet: counts and connected channels appear once it has run."
    if path.is_dir():
        raise fail(f"{path} is a directory, not a store file. Give the file with --store.")
    try:
        with Store.read_only(path) as reader:
            connected = reader.connected_channels()
            counts = reader.event_counts_by_channel()
            cursors = reader.channel_cursors()
    except StoreError as exc:
        raise fail(str(exc)) from exc
    _merge_stored(rows, connected, counts, cursors)
    return ""


def _merge_stored(
    rows: list[dict[str, Any]],
    connected: list[ConnectedChannel],
    counts: dict[str, dict[str, int]],
    cursors: list[tuple[str, str, str, str]],
) -> None:
    by_name = {row["name"]: row for row in rows}
    for channel in connected:
        full_name = f"{channel.kind}:{channel.name}"
        if full_name not in by_name:
            row = _row(full_name, channel.kind, "connected", channel.filter, "")
            rows.append(row)
            by_name[full_name] = row
    for name, row in by_name.items():
        row["stored"] = sum(n for s, n in counts.get(name, {}).items() if s != "filtered")
        row["filtered"] = counts.get(name, {}).get("filtered", 0)
    for cursor_channel, key, value, _ in cursors:
        if cursor_channel in by_name:
            by_name[cursor_channel]["cursors"][key] = value


def _table(rows: list[dict[str, Any]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("name", "origin", "stored", "filtered", "filter", "cursors"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            Text(row["name"], style="red" if row["problem"] else ""),
            row["origin"],
            str(row["stored"]),
            str(row["filtered"]),
            _compact(row["filter"]) or "(everything)",
            ", ".join(f"{k}={v}" for k, v in row["cursors"].items()),
        )
    return table


def _compact(value: dict[str, Any]) -> str:
    return "; ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in value.items())
