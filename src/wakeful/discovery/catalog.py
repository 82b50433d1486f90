"""The catalog of servers and their tools that discovery searches, and labelled queries over it.

A catalog has the shape of MCP `tools/list` results grouped by server, so the same objects are
built from connected MCP servers and from the JSON catalog files of the tool-retrieval data sets
(`{"name", "source", "servers": [{"name", "description", "tools": [{"name", "description",
"inputSchema"}]}]}`). Loading validates every entry and names the file, the entry and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from ..errors import UserError

__all__ = [
    "CATALOG_FILE_NAME",
    "Catalog",
    "CatalogServer",
    "CatalogTool",
    "Query",
    "catalog_path",
    "load_queries",
]

CATALOG_FILE_NAME: Final = "catalog.json"

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True)
class CatalogTool:
    """One tool as a server lists it: what the model would see if the tool were loaded."""

    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class CatalogServer:
    """One server: its self-description and its tools, in the order it lists them."""

    name: str
    description: str
    tools: tuple[CatalogTool, ...]


@dataclass(frozen=True)
class Query:
    """A labelled need: the text and the `(server, tool)` pairs that answer it."""

    id: str | int
    query: str
    expected: tuple[tuple[str, str], ...]


class Catalog:
    """Servers by name, in insertion order; a later server of the same name replaces the first."""

    def __init__(self) -> None:
        self.servers: dict[str, CatalogServer] = {}

    @classmethod
    def from_servers(cls, servers: Iterable[CatalogServer]) -> Catalog:
        catalog = cls()
        for server in servers:
            catalog.servers[server.name] = server
        return catalog

    @classmethod
    def load(cls, path: Path) -> Catalog:
        """Read a catalog file, or the `catalog.json` inside the folder `path`."""
        file = catalog_path(path)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UserError(f"Cannot read the catalog {file}: {exc.strerror}.") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(
                f"The catalog {file} is not valid UTF-8 JSON ({exc}). Fix the file, or point "
                "--catalog at a folder holding a valid catalog.json."
            ) from exc
        return cls.from_servers(_parse_servers(data, file))

    def tool(self, server: str, name: str) -> CatalogTool | None:
        entry = self.servers.get(server)
        if entry is None:
            return None
        return next((t for t in entry.tools if t.name == name), None)

    def tools(self) -> Iterator[CatalogTool]:
        for server in self.servers.values():
            yield from server.tools

    def __len__(self) -> int:
        return sum(len(server.tools) for server in self.servers.values())

    def __repr__(self) -> str:
        return f"Catalog({len(self.servers)} servers, {len(self)} tools)"


def catalog_path(path: Path) -> Path:
    """The catalog file `path` names: itself, or the `catalog.json` in it when it is a folder."""
    if path.is_dir():
        file = path / CATALOG_FILE_NAME
        if not file.is_file():
            raise UserError(
                f"The folder {path} holds no {CATALOG_FILE_NAME}. Point --catalog at a catalog "
                f"file or at a folder that holds one."
            )
        return file
    if not path.exists():
        raise UserError(
            f"The catalog {path} does not exist. Point --catalog at a catalog file or at a "
            f"folder holding {CATALOG_FILE_NAME}."
        )
    return path


def _parse_servers(data: object, file: Path) -> list[CatalogServer]:
    if not isinstance(data, dict) or not isinstance(data.get("servers"), list):
        raise UserError(
            f'The catalog {file} must be a JSON object with a "servers" list, like '
            '{"name": ..., "servers": [{"name": ..., "description": ..., "tools": [...]}]}.'
        )
    servers = []
    for number, raw in enumerate(data["servers"], start=1):
        where = f"server #{number} of the catalog {file}"
        if not isinstance(raw, dict):
            raise UserError(f"The {where} is not a JSON object. Each server is an object.")
        name = _text(raw, "name", where, required=True)
        where = f"server {name!r} (#{number}) of the catalog {file}"
        description = _text(raw, "description", where, required=False)
        tools_raw = raw.get("tools", [])
        if not isinstance(tools_raw, list):
            raise UserError(f'The "tools" of the {where} must be a list of tool objects.')
        tools = tuple(_parse_tool(name, t, i, where) for i, t in enumerate(tools_raw, start=1))
        servers.append(CatalogServer(name=name, description=description, tools=tools))
    return servers


def _parse_tool(server: str, raw: object, number: int, where: str) -> CatalogTool:
    place = f"tool #{number} of the {where}"
    if not isinstance(raw, dict):
        raise UserError(f"The {place} is not a JSON object. Each tool is an object.")
    name = _text(raw, "name", place, required=True)
    place = f"tool {name!r} (#{number}) of the {where}"
    schema = raw.get("inputSchema", raw.get("input_schema", {}))
    if not isinstance(schema, dict):
        raise UserError(f'The "inputSchema" of the {place} must be a JSON Schema object.')
    annotations = raw.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise UserError(f'The "annotations" of the {place} must be an object when present.')
    return CatalogTool(
        server=server,
        name=name,
        description=_text(raw, "description", place, required=False),
        input_schema=schema,
        annotations=annotations,
    )


def _text(raw: Mapping[str, Any], key: str, where: str, *, required: bool) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise UserError(f'The {where} needs a non-empty string "{key}"; it has {value!r}.')
    return value


def load_queries(path: Path) -> list[Query]:
    """Read labelled queries, one JSON object a line: `{"id", "query", "expected": [...]}`.

    `expected` may be missing or empty (a need with no known answer); blank lines are skipped.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"Cannot read the queries file {path}: {exc.strerror}.") from exc
    except UnicodeDecodeError as exc:
        raise UserError(f"The queries file {path} is not UTF-8 text.") from exc
    queries = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            queries.append(_parse_query(line, f"line {number} of {path}"))
    return queries


def _parse_query(line: str, where: str) -> Query:
    fix = 'Each line is {"id": ..., "query": "...", "expected": [{"server": ..., "tool": ...}]}.'
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"The {where} is not valid JSON ({exc.msg}). {fix}") from exc
    if not isinstance(raw, dict):
        raise UserError(f"The {where} is not a JSON object. {fix}")
    text = raw.get("query")
    if not isinstance(text, str) or not text.strip():
        raise UserError(f'The {where} needs a non-empty string "query". {fix}')
    query_id = raw.get("id")
    if not isinstance(query_id, str | int) or isinstance(query_id, bool):
        raise UserError(f'The {where} needs an "id" (a string or an integer). {fix}')
    expected_raw = raw.get("expected") or []
    if not isinstance(expected_raw, list):
        raise UserError(f'The "expected" of the {where} must be a list. {fix}')
    expected = []
    for item in expected_raw:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("server"), str)
            or not isinstance(item.get("tool"), str)
        ):
            raise UserError(
                f'Each "expected" entry of the {where} must be an object with string "server" '
                f'and "tool"; it has {item!r}.'
            )
        expected.append((item["server"], item["tool"]))
    return Query(id=query_id, query=text, expected=tuple(expected))
