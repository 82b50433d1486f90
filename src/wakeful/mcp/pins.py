"""Pins of MCP tool definitions: the lock file that makes a silent change of a tool visible.

A server can change a tool's description between two starts (a "rug pull": benign on the day it
was reviewed, malicious later). Each tool's full definition (name, title, description, input
and output schema, annotations) is hashed with SHA-256 over canonical JSON (sorted keys, no
spaces, UTF-8), and the hashes live in a human-readable lock file, `wakeful.lock.json` next to
`wakeful.toml` by default::

    {
      "//": "Pins of MCP tool definitions. Re-pin with `wakeful mcp approve SERVER [TOOL]`.",
      "weather": {
        "forecast": {
          "sha256": "9f2c…",
          "pinned_at": "2025-06-01T09:30:00Z",
          "pinned_by": "first use",
          "definition": {"name": "forecast", "description": "…", "inputSchema": {…}},
          "pending": {"sha256": "41aa…", "seen_at": "…", "definition": {…}}
        }
      }
    }

Trust on first use: the first time a server's tools are seen, all of them are pinned as they
are ("pinned_by": "first use"); a server configured `pin_mode = "require"` is not, and stays
disabled until someone approves it. A definition that differs from its pin, or a tool that
appears on a pinned server, is recorded under "pending" and is not offered until
`wakeful mcp approve SERVER [TOOL]` moves it to the pin ("pinned_by": "approve"); an approved
pin also overrides the poisoning scanner for exactly that definition.

The runtime and `wakeful mcp approve` (or two runtimes) may update the same file: each does its
read-modify-write while holding an advisory lock (`flock`) on a sidecar file,
`wakeful.lock.json.flock`, and reads the file again inside it, so one never overwrites what
the other just wrote.
"""

from __future__ import annotations

import difflib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError, UserError

LOCK_FILE_NAME = "wakeful.lock.json"
COMMENT_KEY = "//"
COMMENT = "Pins of MCP tool definitions. Re-pin with `wakeful mcp approve SERVER [TOOL]`."

PinMode = Literal["first_use", "require"]
PinnedBy = Literal["first use", "approve"]
PinState = Literal["pinned", "changed", "new", "unpinned"]
"""A tool as its pins see it: as pinned; differs from its pin; not pinned on a pinned server;
on a server that has no pins at all."""

_DEFINITION_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
_DIFF_LINES = 20


def canonical_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a tool definition (MCP wire form) that a pin covers, without empty ones."""
    return {k: definition[k] for k in _DEFINITION_KEYS if definition.get(k) is not None}


def definition_sha256(definition: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a definition: sorted keys, no spaces, UTF-8."""
    text = json.dumps(
        canonical_definition(definition),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Approval:
    """What `approve` re-pinned: one tool, from which hash (None: never pinned) to which."""

    server: str
    tool: str
    old_sha256: str | None
    new_sha256: str
    definition: dict[str, Any]


class ToolPins:
    """The pins of every server's tools: read from and written to a lock file (or kept in
    memory when `path` is None). Writes are atomic; a read-modify-write that another process
    may race belongs inside :meth:`exclusive` (or between :meth:`acquire` and :meth:`release`),
    which re-reads the file when someone else changed it."""

    def __init__(self, path: Path | None = None, *, default_mode: PinMode = "first_use") -> None:
        self.path = path
        self.default_mode: PinMode = default_mode
        self.servers: dict[str, dict[str, dict[str, Any]]] = {}
        self.mtime_ns: int | None = None

    @classmethod
    def load(cls, path: Path, *, default_mode: PinMode = "first_use") -> ToolPins:
        """The pins in `path`; none when the file does not exist yet."""
        pins = cls(path, default_mode=default_mode)
        pins.reload()
        return pins

    # --- the file -----------------------------------------------------------------------------

    def file_mtime_ns(self) -> int | None:
        if self.path is None:
            return None
        try:
            return self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def changed_on_disk(self) -> bool:
        """Whether the file was written by someone else since it was last read or written."""
        return self.path is not None and self.file_mtime_ns() != self.mtime_ns

    def reload(self) -> None:
        """Read the file again (for example after `wakeful mcp approve` rewrote it)."""
        if self.path is None:
            return
        mtime = self.file_mtime_ns()
        if mtime is None:
            self.servers, self.mtime_ns = {}, None
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(
                f"The MCP lock file {str(self.path)!r} is not valid JSON ({exc}). Fix it, or "
                "move it away to pin every server afresh on its next start."
            ) from exc
        if not isinstance(data, dict) or not all(
            isinstance(tools, dict) and all(isinstance(e, dict) for e in tools.values())
            for key, tools in data.items()
            if key != COMMENT_KEY
        ):
            raise ConfigError(
                f"The MCP lock file {str(self.path)!r} is not a map of server → tool → pin. "
                "Fix it, or move it away to pin every server afresh on its next start."
            )
        self.servers = {k: v for k, v in data.items() if k != COMMENT_KEY}
        self.mtime_ns = mtime

    def save(self) -> None:
        """Write the file atomically (a temporary file renamed over it)."""
        if self.path is None:
            return
        data: dict[str, Any] = {COMMENT_KEY: COMMENT, **dict(sorted(self.servers.items()))}
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".wakeful.lock.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self.mtime_ns = self.file_mtime_ns()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the file's advisory lock, with the pins re-read if another process wrote them."""
        handle = self.acquire()
        try:
            yield
        finally:
            self.release(handle)

    def acquire(self) -> int | None:
        """Take the advisory lock (blocking until the holder releases it) and re-read the file
        when it changed on disk; the handle goes to :meth:`release`. None without a file."""
        if self.path is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(self._flock_path(), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            if self.changed_on_disk():
                self.reload()
        except BaseException:
            os.close(handle)
            raise
        return handle

    def release(self, handle: int | None) -> None:
        if handle is not None:
            os.close(handle)  # closing the descriptor drops its lock

    def _flock_path(self) -> Path:
        assert self.path is not None
        return self.path.with_name(f"{self.path.name}.flock")

    # --- checking -----------------------------------------------------------------------------

    def has_server(self, server: str) -> bool:
        return server in self.servers

    def state(self, server: str, definition: Mapping[str, Any]) -> PinState:
        tools = self.servers.get(server)
        if tools is None:
            return "unpinned"
        entry = tools.get(str(definition.get("name", "")))
        if entry is None or "sha256" not in entry:
            return "new"
        return "pinned" if entry["sha256"] == definition_sha256(definition) else "changed"

    def approved(self, server: str, definition: Mapping[str, Any]) -> bool:
        """Whether a person approved exactly this definition with `wakeful mcp approve`."""
        entry = self.servers.get(server, {}).get(str(definition.get("name", "")), {})
        return entry.get("pinned_by") == "approve" and entry.get("sha256") == definition_sha256(
            definition
        )

    def pinned_definition(self, server: str, tool: str) -> dict[str, Any] | None:
        entry = self.servers.get(server, {}).get(tool)
        return None if entry is None else entry.get("definition")

    # --- changing -----------------------------------------------------------------------------

    def pin_first_use(self, server: str, definitions: Sequence[Mapping[str, Any]]) -> None:
        """Trust on first use: pin every tool of a server seen for the first time."""
        when = now_text()
        self.servers[server] = {
            str(d.get("name", "")): _pin(d, when, "first use") for d in definitions
        }

    def record_pending(self, server: str, definition: Mapping[str, Any]) -> bool:
        """Remember a definition that waits for approval; True when it is news."""
        tools = self.servers.setdefault(server, {})
        entry = tools.setdefault(str(definition.get("name", "")), {})
        sha = definition_sha256(definition)
        if entry.get("pending", {}).get("sha256") == sha:
            return False
        entry["pending"] = {
            "sha256": sha,
            "seen_at": now_text(),
            "definition": canonical_definition(definition),
        }
        return True

    def approve(self, server: str, tool: str | None = None) -> list[Approval]:
        """Pin what waits for approval (or confirm the pins as they are) for one tool or every
        tool of a server; a UserError names what is known when there is nothing to approve."""
        tools = self.servers.get(server)
        if tools is None:
            known = ", ".join(sorted(self.servers)) or "none"
            raise UserError(
                f"No MCP server named {server!r} is in the lock file {self._where()}; servers "
                f"there: {known}. Start the runtime once so that it records the server's tools, "
                "then approve them."
            )
        names = sorted(tools) if tool is None else [tool]
        if tool is not None and tool not in tools:
            raise UserError(
                f"MCP server {server!r} has no tool named {tool!r} in the lock file "
                f"{self._where()}; its tools there: {', '.join(sorted(tools)) or 'none'}."
            )
        when = now_text()
        approvals = []
        for name in names:
            entry = tools[name]
            chosen = entry.get("pending") or entry
            if "definition" not in chosen:
                continue
            if entry.get("pinned_by") == "approve" and "pending" not in entry:
                continue
            tools[name] = _pin(chosen["definition"], when, "approve")
            approvals.append(
                Approval(server, name, entry.get("sha256"), chosen["sha256"], chosen["definition"])
            )
        return approvals

    def _where(self) -> str:
        return repr(str(self.path)) if self.path is not None else "(kept in memory)"


def _pin(definition: Mapping[str, Any], when: str, by: PinnedBy) -> dict[str, Any]:
    return {
        "sha256": definition_sha256(definition),
        "pinned_at": when,
        "pinned_by": by,
        "definition": canonical_definition(definition),
    }


# --- what changed -------------------------------------------------------------------------------


def change_summary(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """What changed between two definitions, in words and without quoting either (the text is
    third-party and may be the attack): "the description (24 → 812 characters); parameter
    'sidenote' added"."""
    if old is None:
        return "it was not pinned before"
    parts: list[str] = []
    for key in ("title", "description"):
        before, after = old.get(key) or "", new.get(key) or ""
        if before != after:
            parts.append(f"the {key} ({len(before)} → {len(after)} characters)")
    old_props = _properties(old)
    new_props = _properties(new)
    added = sorted(set(new_props) - set(old_props))
    removed = sorted(set(old_props) - set(new_props))
    altered = sorted(p for p in set(old_props) & set(new_props) if old_props[p] != new_props[p])
    for label, names in (("added", added), ("removed", removed), ("changed", altered)):
        if names:
            parts.append(f"parameter(s) {', '.join(repr(n) for n in names)} {label}")
    for key in ("inputSchema", "outputSchema", "annotations"):
        if _without_properties(old.get(key)) != _without_properties(new.get(key)):
            parts.append(f"the {key}")
    return "; ".join(parts) or "nothing a model reads"


def _properties(definition: Mapping[str, Any]) -> dict[str, Any]:
    schema = definition.get("inputSchema") or {}
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return dict(props) if isinstance(props, Mapping) else {}


def _without_properties(schema: object) -> object:
    if isinstance(schema, Mapping):
        return {k: v for k, v in schema.items() if k != "properties"}
    return schema


def definition_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """A short unified diff of two definitions (for the operator): the texts line by line, the
    schemas and annotations as indented JSON."""
    before = _diffable(old or {})
    after = _diffable(new)
    lines = list(difflib.unified_diff(before, after, "pinned", "offered", n=1, lineterm=""))
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"… {len(lines) - _DIFF_LINES} more diff lines"]
    return "\n".join(lines)


def _diffable(definition: Mapping[str, Any]) -> list[str]:
    canonical = canonical_definition(definition)
    lines: list[str] = []
    for key, value in canonical.items():
        if isinstance(value, str):
            lines += [f"{key}:", *(f"  {line}" for line in value.splitlines())]
        else:
            text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
            lines += [f"{key}:", *(f"  {line}" for line in text.splitlines())]
    return lines
