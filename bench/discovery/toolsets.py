"""The labelled tool catalogs of ../shared/data/toolsets, read without wakeful.

The benchmark keeps its own reader so that the baselines see exactly the published data and do
not depend on how `wakeful.discovery` parses it. Format: `catalog.json` holds servers, each with
MCP-shaped tools; `queries.jsonl` holds one query a line with the (server, tool) pairs it needs.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

# The public catalogs (catalog.json + queries.jsonl per set): $WAKEFUL_TOOLSETS, or
# shared/data/toolsets beside the repository.
DATA_ROOT = Path(
    os.environ.get("WAKEFUL_TOOLSETS")
    or Path(__file__).resolve().parents[3] / "shared" / "data" / "toolsets"
)
SET_NAMES = (
    "metatool",
    "livemcpbench",
    "seal_tools_test_in_domain",
    "seal_tools_test_out_domain",
    "stabletoolbench",
)

T = TypeVar("T")

ToolKey = tuple[str, str]
"""A tool's identity in a catalog: (server name, tool name)."""


@dataclass(frozen=True, slots=True)
class CatalogTool:
    """One tool as published: its server, name, description and JSON input schema."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def key(self) -> ToolKey:
        return (self.server, self.name)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        properties = self.input_schema.get("properties") or {}
        return tuple(properties) if isinstance(properties, dict) else ()


@dataclass(frozen=True, slots=True)
class CatalogServer:
    name: str
    description: str
    tools: tuple[CatalogTool, ...]


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    """A need in words and the tools that answer it (one or several)."""

    id: str
    text: str
    expected: tuple[ToolKey, ...]


@dataclass(frozen=True, slots=True)
class ToolSet:
    """One benchmark set: where it lives, its servers and its labelled queries."""

    name: str
    folder: Path
    servers: tuple[CatalogServer, ...]
    queries: tuple[LabelledQuery, ...]

    @property
    def tools(self) -> tuple[CatalogTool, ...]:
        return tuple(tool for server in self.servers for tool in server.tools)

    @property
    def catalog_path(self) -> Path:
        return self.folder / "catalog.json"

    @property
    def queries_path(self) -> Path:
        return self.folder / "queries.jsonl"


def load_toolset(folder: Path) -> ToolSet:
    """Read `catalog.json` and `queries.jsonl` from `folder`."""
    if not (folder / "catalog.json").is_file():
        raise SystemExit(
            f"No tool catalog at {folder}: set WAKEFUL_TOOLSETS to the folder that holds the "
            "sets (each a folder with catalog.json and queries.jsonl)."
        )
    catalog = json.loads((folder / "catalog.json").read_text(encoding="utf-8"))
    servers = tuple(_server(entry) for entry in catalog["servers"])
    queries = tuple(
        _query(json.loads(line))
        for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
    return ToolSet(catalog.get("name", folder.name), folder, servers, queries)


def subsample(items: Sequence[T], size: int, seed: int = 0) -> tuple[T, ...]:
    """At most `size` items (queries) drawn with a fixed seed, kept in their original order."""
    if len(items) <= size:
        return tuple(items)
    chosen = sorted(random.Random(seed).sample(range(len(items)), size))
    return tuple(items[i] for i in chosen)


def _server(entry: dict[str, Any]) -> CatalogServer:
    name = entry["name"]
    tools = tuple(
        CatalogTool(
            name, tool["name"], tool.get("description") or "", tool.get("inputSchema") or {}
        )
        for tool in entry.get("tools", ())
    )
    return CatalogServer(name, entry.get("description") or "", tools)


def _query(entry: dict[str, Any]) -> LabelledQuery:
    # A few published queries list the same tool twice; a tool is needed or it is not.
    expected = tuple(dict.fromkeys((e["server"], e["tool"]) for e in entry["expected"]))
    return LabelledQuery(str(entry["id"]), entry["query"], expected)
