"""check_file on real files with the real checkers: ruff, node, and the data-format parsers."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from wakeful.toolkits.execution.diagnostics import (
    Diagnostic,
    DiagnosticsSettings,
    FileCheck,
    check_file,
)

DEFAULTS = DiagnosticsSettings()
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


async def check(
    path: Path, text: str | bytes, settings: DiagnosticsSettings = DEFAULTS
) -> FileCheck:
    data = text.encode() if isinstance(text, str) else text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)  # noqa: ASYNC240 - a few bytes into a temporary directory
    return await check_file(path, data, settings)


@pytest.mark.anyio
async def test_python_gets_syntax_errors_and_pyflakes_by_default(tmp_path: Path) -> None:
    found = await check(tmp_path / "a.py", "import os\nx = 1   \nprint(result)\n")
    assert found.checker == "ruff"
    codes = [(d.line, d.code) for d in found.diagnostics]
    assert codes == [(1, "F401"), (3, "F821")]  # no W291 for the trailing spaces: style is off
    broken = await check(tmp_path / "b.py", "def f(:\n    pass\n")
    assert (broken.diagnostics[0].line, broken.diagnostics[0].code) == (1, "invalid-syntax")
    assert found.summary().startswith("ruff: ")
    assert "line 3 col 7 F821 Undefined name `result`" in found.summary()


@pytest.mark.anyio
async def test_python_follows_the_workspace_ruff_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["W291"]\n')
    found = await check(tmp_path / "pkg" / "a.py", "print(result)  \n")
    assert [(d.line, d.code) for d in found.diagnostics] == [(1, "W291")]
    assert found.note == "Rules from the workspace's pyproject.toml."
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no [tool.ruff]
    default = await check(tmp_path / "pkg" / "a.py", "print(result)  \n")
    assert [d.code for d in default.diagnostics] == ["F821"]


@pytest.mark.anyio
async def test_a_clean_file_has_no_problems(tmp_path: Path) -> None:
    found = await check(tmp_path / "ok.py", "print('ok')\n")
    assert found == FileCheck("ruff", [], None)
    assert found.summary() == "ruff: no problems"


@pytest.mark.anyio
async def test_a_missing_checker_is_a_note_not_an_error(tmp_path: Path) -> None:
    settings = DiagnosticsSettings(ruff_command=("no-such-ruff-here",), node_command="no-node")
    python = await check(tmp_path / "a.py", "x = \n", settings)
    assert python.checker is None
    assert python.note == "`no-such-ruff-here` is not installed; Python was not checked."
    script = await check(tmp_path / "a.js", "let x = ;\n", settings)
    assert script.note == "`no-node` is not installed; JavaScript was not checked."
    assert script.summary() == script.note


@pytest.mark.anyio
async def test_a_checker_that_hangs_is_stopped(tmp_path: Path) -> None:
    sleeper = tmp_path / "sleep.py"
    sleeper.write_text("import time\ntime.sleep(30)\n")
    settings = DiagnosticsSettings(ruff_command=(sys.executable, str(sleeper)), timeout_seconds=0.5)
    found = await check(tmp_path / "a.py", "x = 1\n", settings)
    assert found.checker is None and "did not finish within 0.5 s" in (found.note or "")


@needs_node
@pytest.mark.anyio
async def test_javascript_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    found = await check(tmp_path / "a.js", "const a = 1;\nlet x = ;\n")
    assert found.checker == "node --check"
    assert found.diagnostics == [Diagnostic(2, 9, "SyntaxError", "Unexpected token ';'")]
    clean = await check(tmp_path / "ok.js", "const a = 1;\n")
    assert clean.diagnostics == []


@needs_node
@pytest.mark.anyio
async def test_an_es_module_in_a_js_file_is_checked_as_one(tmp_path: Path) -> None:
    good = await check(tmp_path / "m.js", "import fs from 'node:fs';\nexport const a = fs;\n")
    assert good.diagnostics == []
    bad = await check(tmp_path / "n.js", "import fs from 'node:fs';\nexport const = 1;\n")
    (problem,) = bad.diagnostics
    assert problem.line == 2 and problem.code == "SyntaxError"
    assert "outside a module" not in problem.message


@needs_node
@pytest.mark.anyio
async def test_typescript_is_checked_or_the_result_says_why_not(tmp_path: Path) -> None:
    found = await check(tmp_path / "a.ts", "const x: number = ;\n")
    if found.checker is None:
        assert found.note is not None and "TypeScript was not checked" in found.note
        assert "22.6" in found.note
    else:
        assert found.diagnostics and found.diagnostics[0].line == 1


@pytest.mark.anyio
async def test_eslint_output_becomes_diagnostics(tmp_path: Path) -> None:
    # A stand-in for eslint that speaks its command line and JSON format: it reports one
    # message per line of stdin that holds "var ".
    stand_in = tmp_path / "eslint.py"
    stand_in.write_text(
        "import json, sys\n"
        "assert sys.argv[1:4] == ['--format', 'json', '--stdin'], sys.argv\n"
        "lines = sys.stdin.read().splitlines()\n"
        "messages = [\n"
        "    {'line': n, 'column': l.index('var ') + 1, 'ruleId': 'no-var',\n"
        "     'message': 'Unexpected var.'}\n"
        "    for n, l in enumerate(lines, 1) if 'var ' in l\n"
        "]\n"
        "print(json.dumps([{'filePath': sys.argv[5], 'messages': messages}]))\n"
    )
    settings = DiagnosticsSettings(
        eslint_command=(sys.executable, str(stand_in)), node_command="no-node"
    )
    found = await check(tmp_path / "a.js", "let a = 1;\n  var b = 2;\n", settings)
    assert found.checker == "eslint"
    assert found.diagnostics == [Diagnostic(2, 3, "no-var", "Unexpected var.")]
    assert "`no-node` is not installed" in (found.note or "")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "a.json",
            '{\n  "a": 1,\n}\n',
            Diagnostic(3, 1, "syntax", "Expecting property name enclosed in double quotes"),
        ),
        (
            "a.yaml",
            "a: [1\nb: 2\n",
            Diagnostic(
                2, 2, "syntax", "expected ',' or ']', but got ':' while parsing a flow sequence"
            ),
        ),
        ("a.toml", "[x]\na = \n", Diagnostic(2, 5, "syntax", "Invalid value")),
        (
            "a.json",
            b'{"a": "caf\xe9"}',
            Diagnostic(1, 11, "encoding", "byte 10 is not valid UTF-8"),
        ),
    ],
)
async def test_data_formats_report_the_parsers_position(
    tmp_path: Path, name: str, text: str | bytes, expected: Diagnostic
) -> None:
    found = await check(tmp_path / name, text)
    assert found.diagnostics == [expected]


@pytest.mark.anyio
async def test_valid_data_and_unknown_kinds(tmp_path: Path) -> None:
    assert (await check(tmp_path / "a.yml", "a: 1\n---\nb: 2\n")).summary() == "yaml: no problems"
    assert (await check(tmp_path / "a.toml", "a = 1\n")).diagnostics == []
    other = await check(tmp_path / "notes.txt", "anything\n")
    assert other.checker is None
    assert other.summary() == "not checked: there is no checker for '.txt' files."


def test_a_long_list_of_problems_is_cut_in_the_summary() -> None:
    many = FileCheck("ruff", [Diagnostic(n, 1, "F821", "Undefined name `x`") for n in range(1, 26)])
    summary = many.summary()
    assert summary.startswith("ruff: 25 problems: line 1 col 1 F821")
    assert summary.endswith("; and 5 more")
    assert "line 21 " not in summary
