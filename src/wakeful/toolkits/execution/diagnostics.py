"""What a file's own linter or parser says about it, right after a tool wrote it.

A model that writes code learns about a syntax error at once, in the result of the write, instead
of three turns later from a failing run. The checker is chosen by the file's extension:

* Python (`.py`, `.pyi`): ruff, with the content on stdin. When the workspace has a ruff
  configuration (`ruff.toml`, `.ruff.toml`, or a `pyproject.toml` with a `[tool.ruff]` table in
  the file's directory or one above it) that configuration decides the rules, because it is what
  the project's own CI will run. Otherwise only `E9,F` (syntax errors and pyflakes: undefined
  names, unused imports) are checked, so style rules nobody asked for do not drown the real
  problems.
* JavaScript (`.js`, `.mjs`, `.cjs`): `node --check` on the written file (node needs the
  extension and the nearest package.json to know whether it is an ES module), then eslint when
  `DiagnosticsSettings.eslint_command` names one.
* TypeScript (`.ts`, `.mts`, `.cts`): `node --experimental-strip-types --check` where node is 22.6
  or later; older nodes cannot, and the check says so. Then eslint, when configured.
* JSON, YAML (`yaml.safe_load_all`) and TOML (`tomllib`): parsed; the parser's error gives the
  line and column.

A checker that is missing or fails is a note in the result ("node is not installed; JavaScript
was not checked"), never an error of the write: the file is written either way.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml

from .settings import DiagnosticsSettings

__all__ = [
    "Diagnostic",
    "DiagnosticsSettings",
    "FileCheck",
    "check_file",
]

_LISTED = 20
_PYTHON = {".py", ".pyi"}
_JAVASCRIPT = {".js", ".mjs", ".cjs"}
_TYPESCRIPT = {".ts", ".mts", ".cts"}
_YAML = {".yaml", ".yml"}
_RUFF_CONFIGS = ("ruff.toml", ".ruff.toml", "pyproject.toml")
_NODE_LOCATION = re.compile(r"^(?P<file>.*):(?P<line>\d+)$")
_NODE_ERROR = re.compile(r"^(?P<kind>[A-Za-z]*Error): (?P<message>.*)$")
# tomllib (Python 3.11) puts the position only in its message, "Invalid value (at line 3,
# column 5)"; newer Pythons also set lineno/colno, which are used when present.
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)$")
# node treats a `.js` file as CommonJS unless package.json says otherwise; these errors mean the
# file is an ES module, so it is checked again as one.
_ESM_STATEMENT = re.compile(rb"^[ \t]*(?:import|export)\b[^(.]", re.MULTILINE)
_ESM_IN_COMMONJS = (
    "Cannot use import statement outside a module",
    "Unexpected token 'export'",
    "Cannot use 'import.meta' outside a module",
)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem a checker found: 1-based line and column, the rule's code, its message."""

    line: int
    column: int
    code: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class FileCheck:
    """The outcome of checking one file: which checker ran, what it found, and what to know.

    `checker` is None when no checker applies to the file or none could run; `note` then says
    why. A checker that ran and found nothing has an empty `diagnostics` list.
    """

    checker: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    note: str | None = None

    def summary(self) -> str:
        """One line for the model, e.g. "ruff: 2 problems: line 10 col 5 F821 undefined …"."""
        if self.checker is None:
            return self.note or "not checked."
        count = len(self.diagnostics)
        if count == 0:
            text = f"{self.checker}: no problems"
        else:
            listed = "; ".join(
                f"line {d.line} col {d.column} {d.code} {d.message}"
                for d in self.diagnostics[:_LISTED]
            )
            more = f"; and {count - _LISTED} more" if count > _LISTED else ""
            text = f"{self.checker}: {count} problem{'' if count == 1 else 's'}: {listed}{more}"
        return f"{text}. {self.note}" if self.note else text

    def as_dict(self) -> dict[str, Any]:
        return {
            "checker": self.checker,
            "diagnostics": [d.as_dict() for d in self.diagnostics],
            "note": self.note,
        }


async def check_file(path: Path, content: bytes, settings: DiagnosticsSettings) -> FileCheck:
    """Check `content`, the bytes just written to `path`, with the checker for its extension.

    `path` must be the written file: ruff and eslint use it to find the project's
    configuration, and node checks the file itself.
    """
    suffix = path.suffix.lower()
    if suffix in _PYTHON:
        return await _check_python(path, content, settings)
    if suffix in _JAVASCRIPT or suffix in _TYPESCRIPT:
        return await _check_script(path, content, settings)
    if suffix == ".json":
        return await anyio.to_thread.run_sync(_check_json, content)
    if suffix in _YAML:
        return await anyio.to_thread.run_sync(_check_yaml, content)
    if suffix == ".toml":
        return await anyio.to_thread.run_sync(_check_toml, content)
    kind = f"{suffix!r} files" if suffix else "files without an extension"
    return FileCheck(None, note=f"not checked: there is no checker for {kind}.")


# --- running a checker -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ran:
    returncode: int
    stdout: str
    stderr: str


class _CouldNotRun(Exception):
    """A checker program is missing or did not finish; the message is the note to show."""


async def _run(
    command: list[str], settings: DiagnosticsSettings, *, stdin: bytes = b"", cwd: Path
) -> _Ran:
    try:
        with anyio.fail_after(settings.timeout_seconds):
            done = await anyio.run_process(command, input=stdin, check=False, cwd=cwd)
    except TimeoutError as exc:
        raise _CouldNotRun(
            f"`{command[0]}` did not finish within {settings.timeout_seconds:g} s"
        ) from exc
    except FileNotFoundError as exc:
        raise _CouldNotRun(f"`{command[0]}` is not installed") from exc
    except PermissionError as exc:
        raise _CouldNotRun(f"`{command[0]}` cannot be run (permission denied)") from exc
    return _Ran(
        done.returncode,
        done.stdout.decode("utf-8", errors="replace"),
        done.stderr.decode("utf-8", errors="replace"),
    )


# --- Python ------------------------------------------------------------------------------------


def _ruff_command(settings: DiagnosticsSettings) -> list[str] | None:
    if settings.ruff_command is not None:
        return list(settings.ruff_command)
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else None


def ruff_config_for(path: Path) -> Path | None:
    """The ruff configuration that governs `path`: the nearest one in its directory or above."""
    for directory in path.parents:
        for name in _RUFF_CONFIGS:
            candidate = directory / name
            if not candidate.is_file():
                continue
            if name != "pyproject.toml" or _has_ruff_table(candidate):
                return candidate
    return None


def _has_ruff_table(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # ruff would fail on it too; the check then falls back to the defaults
    tool = data.get("tool")
    return isinstance(tool, dict) and "ruff" in tool


async def _check_python(path: Path, content: bytes, settings: DiagnosticsSettings) -> FileCheck:
    command = _ruff_command(settings)
    if command is None:
        return FileCheck(None, note="ruff is not installed; Python was not checked.")
    config = await anyio.to_thread.run_sync(ruff_config_for, path)
    options = ["check", "--output-format=json", "--no-cache", "--exit-zero"]
    if config is None:
        options += ["--isolated", "--select", ",".join(settings.default_python_rules)]
    else:
        options += ["--config", str(config)]
    options += ["--stdin-filename", str(path), "-"]
    try:
        ran = await _run(command + options, settings, stdin=content, cwd=path.parent)
    except _CouldNotRun as exc:
        return FileCheck(None, note=f"{exc}; Python was not checked.")
    try:
        found = json.loads(ran.stdout)
    except json.JSONDecodeError:
        reason = (ran.stderr.strip() or ran.stdout.strip() or "no output")[:300]
        return FileCheck(None, note=f"ruff failed ({reason}); Python was not checked.")
    diagnostics = [
        Diagnostic(
            line=int(item["location"]["row"]),
            column=int(item["location"]["column"]),
            code=str(item.get("code") or "invalid-syntax"),
            message=str(item["message"]),
        )
        for item in found
    ]
    note = None
    if config is not None:
        note = f"Rules from the workspace's {config.name}."
    return FileCheck("ruff", diagnostics, note)


# --- JavaScript and TypeScript -------------------------------------------------------------------


async def _check_script(path: Path, content: bytes, settings: DiagnosticsSettings) -> FileCheck:
    typescript = path.suffix.lower() in _TYPESCRIPT
    check = await _node_check(path, content, settings, typescript=typescript)
    if settings.eslint_command is None:
        return check
    linted = await _eslint(path, content, settings)
    if check.checker is None and linted.checker is None:
        return FileCheck(None, note=f"{check.note} {linted.note}")
    if linted.checker is None:
        check.note = " ".join(n for n in (check.note, linted.note) if n)
        return check
    if check.checker is None:
        linted.note = " ".join(n for n in (check.note, linted.note) if n)
        return linted
    both = FileCheck(f"{check.checker} + {linted.checker}", check.diagnostics + linted.diagnostics)
    both.note = " ".join(n for n in (check.note, linted.note) if n) or None
    return both


async def _node_check(
    path: Path, content: bytes, settings: DiagnosticsSettings, *, typescript: bool
) -> FileCheck:
    language = "TypeScript" if typescript else "JavaScript"
    node = settings.node_command
    options = ["--check"]
    if typescript:
        try:
            version = await _run([node, "--version"], settings, cwd=path.parent)
        except _CouldNotRun as exc:
            return FileCheck(None, note=f"{exc}; {language} was not checked.")
        if not _strips_types(version.stdout):
            return FileCheck(
                None,
                note=f"TypeScript was not checked: node {version.stdout.strip()} cannot strip "
                "types (node 22.6 or later can).",
            )
        options = ["--experimental-strip-types", "--no-warnings", "--check"]
    try:
        ran = await _run([node, *options, str(path)], settings, cwd=path.parent)
        first = _node_diagnostic(ran)
        # node 20 guesses the module type of a `.js` file without a package.json "type", and
        # `--check` then passes an ES module with a syntax error; such a file (one with import
        # or export statements) is checked again explicitly as a module.
        looks_esm = path.suffix.lower() == ".js" and _ESM_STATEMENT.search(content) is not None
        esm_error = first is not None and first.message.startswith(_ESM_IN_COMMONJS)
        if not typescript and (esm_error or (first is None and looks_esm)):
            as_module = await _run(
                [node, "--input-type=module", "--check"], settings, stdin=content, cwd=path.parent
            )
            first = _node_diagnostic(as_module)
    except _CouldNotRun as exc:
        return FileCheck(None, note=f"{exc}; {language} was not checked.")
    return FileCheck("node --check", [] if first is None else [first])


def _strips_types(version: str) -> bool:
    match = re.match(r"v(\d+)\.(\d+)", version.strip())
    return match is not None and (int(match[1]), int(match[2])) >= (22, 6)


def _node_diagnostic(ran: _Ran) -> Diagnostic | None:
    """node's one syntax error: "FILE:LINE", the source line, a caret line, "XError: message"."""
    if ran.returncode == 0:
        return None
    lines = ran.stderr.splitlines()
    line_number = 0
    column = 0
    message = ran.stderr.strip()[:300] or f"node exited with status {ran.returncode}"
    code = "error"
    for index, text in enumerate(lines):
        location = _NODE_LOCATION.match(text)
        if location and not line_number:
            line_number = int(location["line"])
            caret_line = lines[index + 2] if index + 2 < len(lines) else ""
            if caret_line.strip().startswith("^"):
                column = caret_line.index("^") + 1
        error = _NODE_ERROR.match(text)
        if error:
            code, message = error["kind"], error["message"]
            break
    return Diagnostic(line=line_number, column=column, code=code, message=message)


async def _eslint(path: Path, content: bytes, settings: DiagnosticsSettings) -> FileCheck:
    assert settings.eslint_command is not None
    command = [
        *settings.eslint_command,
        "--format",
        "json",
        "--stdin",
        "--stdin-filename",
        str(path),
    ]
    try:
        ran = await _run(command, settings, stdin=content, cwd=path.parent)
    except _CouldNotRun as exc:
        return FileCheck(None, note=f"{exc}; eslint did not run.")
    try:
        reports = json.loads(ran.stdout)
        messages = [m for report in reports for m in report.get("messages", [])]
        diagnostics = [
            Diagnostic(
                line=int(m.get("line") or 0),
                column=int(m.get("column") or 0),
                code=str(m.get("ruleId") or "parse-error"),
                message=str(m.get("message", "")),
            )
            for m in messages
        ]
    except (json.JSONDecodeError, TypeError, AttributeError, ValueError):
        reason = (ran.stderr.strip() or ran.stdout.strip() or "no output")[:300]
        return FileCheck(None, note=f"eslint failed ({reason}).")
    return FileCheck("eslint", diagnostics)


# --- data formats ------------------------------------------------------------------------------


def _text_of(content: bytes, checker: str) -> str | FileCheck:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        column = exc.start - (content.rfind(b"\n", 0, exc.start) + 1) + 1
        problem = Diagnostic(line, column, "encoding", f"byte {exc.start} is not valid UTF-8")
        return FileCheck(checker, [problem])


def _check_json(content: bytes) -> FileCheck:
    text = _text_of(content, "json")
    if isinstance(text, FileCheck):
        return text
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return FileCheck("json", [Diagnostic(exc.lineno, exc.colno, "syntax", exc.msg)])
    return FileCheck("json")


def _check_yaml(content: bytes) -> FileCheck:
    text = _text_of(content, "yaml")
    if isinstance(text, FileCheck):
        return text
    try:
        for _document in yaml.safe_load_all(text):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        message = " ".join(part for part in (exc.problem, exc.context) if part) or str(exc)
        return FileCheck("yaml", [Diagnostic(line, column, "syntax", message)])
    except yaml.YAMLError as exc:
        return FileCheck("yaml", [Diagnostic(0, 0, "syntax", str(exc))])
    return FileCheck("yaml")


def _check_toml(content: bytes) -> FileCheck:
    text = _text_of(content, "toml")
    if isinstance(text, FileCheck):
        return text
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "colno", None)
        position = _TOML_POSITION.search(message)
        if position is not None:
            message = message[: position.start()].rstrip()
            if line is None or column is None:
                line, column = int(position[1]), int(position[2])
        return FileCheck("toml", [Diagnostic(line or 0, column or 0, "syntax", message)])
    return FileCheck("toml")
