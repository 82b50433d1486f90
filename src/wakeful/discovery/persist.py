"""Saving a :class:`~.index.ToolIndex` to one file and reading it back.

The file is a numpy `.npz` archive: a versioned JSON header holding the catalog (from which the
lexical index is rebuilt in about a second at 4,000 tools, cheaper than storing postings) and,
when the index was dense, the server and tool vectors, which are the expensive part to recompute
(and those of its precise embedder, when it had one).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from ..errors import UserError
from .catalog import CatalogServer, CatalogTool
from .embeddings import Embedder

__all__ = [
    "FORMAT",
    "VERSION",
    "SavableIndex",
    "SavedIndex",
    "read_index",
    "save_index",
]

FORMAT: Final = "wakeful-tool-index"
# 2: the ONNX embedder embeds each text alone, so a version-1 file's precise vectors (embedded
# in batches) differ from what the same embedder gives now.
VERSION: Final = 2

Vectors = npt.NDArray[np.float32]


class SavableIndex(Protocol):
    """What saving needs of an index: its catalog and its vectors. A protocol rather than
    :class:`~.index.ToolIndex` itself, so that this module does not import the index."""

    @property
    def servers(self) -> Mapping[str, CatalogServer]: ...

    def vectors(self, *, precise: bool = False) -> tuple[Vectors | None, Vectors | None]: ...


@dataclass(frozen=True)
class SavedIndex:
    """What an index file holds, checked against the embedders that will use it: the catalog,
    and the vectors of the fast and the precise embedder (None: to be computed again)."""

    servers: list[CatalogServer]
    server_vectors: Vectors | None
    tool_vectors: Vectors | None
    precise: tuple[Vectors, Vectors] | None


def save_index(index: SavableIndex, path: Path) -> None:
    server_vectors, tool_vectors = index.vectors()
    header = {
        "format": FORMAT,
        "version": VERSION,
        "dense": server_vectors is not None,
        "servers": [_server_json(s) for s in index.servers.values()],
    }
    arrays: dict[str, Any] = {
        "header": np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    }
    if server_vectors is not None and tool_vectors is not None:
        arrays["server_vectors"] = server_vectors
        arrays["tool_vectors"] = tool_vectors
    precise_servers, precise_tools = index.vectors(precise=True)
    if precise_servers is not None and precise_tools is not None:
        arrays["precise_server_vectors"] = precise_servers
        arrays["precise_tool_vectors"] = precise_tools
    try:
        with path.open("wb") as file:
            np.savez_compressed(file, **arrays)
    except OSError as exc:
        raise UserError(f"Cannot write the tool index {path}: {exc.strerror}.") from exc


def read_index(
    path: Path, *, embedder: Embedder | None = None, precise_embedder: Embedder | None = None
) -> SavedIndex:
    """The contents of an index file written by :func:`save_index`, keeping only the vectors
    of the embedders given (checked to be theirs); a corrupt or old file raises `UserError`."""
    rebuild = (
        f"Delete {path} and build it again (e.g. `wakeful tools search --catalog CATALOG "
        f"--index {path} ...` rebuilds a missing index)."
    )
    try:
        # numpy leaks the handle of a truncated archive it opened itself, so open it here.
        with path.open("rb") as file, np.load(file, allow_pickle=False) as archive:
            header = json.loads(bytes(archive["header"]).decode("utf-8"))
            vectors = (
                (archive["server_vectors"], archive["tool_vectors"])
                if "server_vectors" in archive.files
                else (None, None)
            )
            precise = (
                (archive["precise_server_vectors"], archive["precise_tool_vectors"])
                if "precise_server_vectors" in archive.files
                else None
            )
    except FileNotFoundError as exc:
        raise UserError(f"The tool index {path} does not exist. {rebuild}") from exc
    except OSError as exc:
        raise UserError(f"Cannot read the tool index {path}: {exc}. {rebuild}") from exc
    except (ValueError, KeyError, TypeError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise UserError(f"The tool index {path} is corrupt ({exc}). {rebuild}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise UserError(f"The file {path} is not a wakeful tool index. {rebuild}")
    if header.get("version") != VERSION:
        raise UserError(
            f"The tool index {path} has format version {header.get('version')!r}; this "
            f"wakeful reads version {VERSION}. {rebuild}"
        )
    try:
        servers = [_server_from_json(s) for s in header["servers"]]
    except (KeyError, TypeError) as exc:
        raise UserError(f"The tool index {path} is corrupt (bad server entry). {rebuild}") from exc
    server_vectors, tool_vectors = vectors
    tools = sum(len(s.tools) for s in servers)
    if embedder is None:
        server_vectors = tool_vectors = None
    elif server_vectors is not None and tool_vectors is not None:
        _check_fit(path, embedder, server_vectors, tool_vectors, len(servers), tools, rebuild)
    if precise_embedder is None:
        precise = None
    elif precise is not None:
        _check_fit(path, precise_embedder, *precise, len(servers), tools, rebuild)
    return SavedIndex(servers, server_vectors, tool_vectors, precise)


def _check_fit(
    path: Path,
    embedder: Embedder,
    server_vectors: npt.NDArray[np.float32],
    tool_vectors: npt.NDArray[np.float32],
    servers: int,
    tools: int,
    rebuild: str,
) -> None:
    """Refuse vectors made by another model: their dimension or count would not match."""
    probe = embedder.embed(["dimension probe"])
    if server_vectors.shape != (servers, probe.shape[1]) or tool_vectors.shape != (
        tools,
        probe.shape[1],
    ):
        raise UserError(
            f"The vectors in the tool index {path} do not fit the embedder given (shape "
            f"{tool_vectors.shape} for {tools} tools, model dimension {probe.shape[1]}): "
            f"it was built with another model. {rebuild}"
        )


def _server_json(server: CatalogServer) -> dict[str, Any]:
    return {
        "name": server.name,
        "description": server.description,
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "inputSchema": dict(t.input_schema),
                "annotations": dict(t.annotations),
            }
            for t in server.tools
        ],
    }


def _server_from_json(raw: dict[str, Any]) -> CatalogServer:
    name = str(raw["name"])
    return CatalogServer(
        name=name,
        description=str(raw["description"]),
        tools=tuple(
            CatalogTool(
                server=name,
                name=str(t["name"]),
                description=str(t["description"]),
                input_schema=t["inputSchema"],
                annotations=t["annotations"],
            )
            for t in raw["tools"]
        ),
    )
