"""The tool description standard: every built-in tool meets it, and a tool that misses a part
gets one finding that says what to add. `wakeful tools lint` checks built-ins (failing on a miss)
and third-party stdio MCP servers (as advice)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner, Result

from wakeful.cli.tools import BUILTIN_TOOL_SOURCES, tools_app
from wakeful.errors import UserError
from wakeful.models.base import ToolDefinition
from wakeful.runtime import core_tools
from wakeful.tools.lint import RULES, lint_definition, lint_definitions, lint_tool
from wakeful.tools.spec import Tool, tool

LINT_SERVER = Path(__file__).resolve().parents[1] / "mcp_lint_server.py"

GOOD_DESCRIPTION = """Look up the weather forecast of a city.

Use it when the user asks about the weather in a place. It cannot forecast more than 7 days ahead.
Result: {"city": "Paris", "days": [{"date": "2025-06-02", "high_c": 24}]}.
Cost: about 300 ms; under 1,000 characters."""

GOOD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "The city, e.g. 'Paris'."},
        "days": {"type": "integer", "minimum": 1, "description": "How many days, e.g. 3."},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def rules(findings: list[Any]) -> list[str]:
    return [f.rule for f in findings]


# Registered as cli.py registers it: `wakeful tools …`.
wakeful = typer.Typer()
wakeful.add_typer(tools_app, name="tools")


def cli(*args: str) -> Result:
    return CliRunner().invoke(
        wakeful, ["tools", *args], env={"COLUMNS": "200"}, catch_exceptions=False
    )


# --- the built-in tools --------------------------------------------------------------------------


@pytest.mark.parametrize("builtin", core_tools(), ids=lambda t: t.name)
def test_every_built_in_tool_meets_the_standard(builtin: Tool) -> None:
    assert lint_tool(builtin) == []


def test_every_built_in_tool_source_meets_the_standard() -> None:
    async def lint_all() -> list[Any]:
        return [await source.lint() for source in BUILTIN_TOOL_SOURCES]

    reports = anyio.run(lint_all)
    assert {name for r in reports for name in r.tools} >= {t.name for t in core_tools()}
    assert [f for r in reports for f in r.findings] == []


# --- our tools -----------------------------------------------------------------------------------


@tool
async def bare(text: str, count: Annotated[int, Field(description="How many.")] = 1) -> str:
    """Echo the text."""
    return text * count


def test_a_bare_tool_gets_one_finding_per_missing_part() -> None:
    findings = lint_tool(bare)
    assert rules(findings) == [
        "when-to-use",
        "limits",
        "result",
        "cost",
        "parameter-example",
        "parameter-example",
        "examples",
    ]
    assert all(f.tool == "bare" for f in findings)
    # Each message says what to add, with an example.
    assert all("e.g." in f.message for f in findings)
    assert "Parameter 'text' has no description" in findings[4].message
    assert "parameter 'count' ('How many.') gives no example value" in findings[5].message


def make_tool(description: str = GOOD_DESCRIPTION, **kwargs: Any) -> Tool:
    @tool(name="forecast", description=description, **kwargs)
    async def forecast(
        city: Annotated[str, Field(description="The city, e.g. 'Paris'.")],
        days: Annotated[int, Field(ge=1, description="How many days, e.g. 3.")] = 1,
    ) -> str:
        return city

    return forecast


def test_a_tool_that_meets_the_standard_has_no_findings() -> None:
    assert lint_tool(make_tool(examples=({"city": "Paris"},))) == []
    assert lint_tool(make_tool(examples=({"city": "Paris"},)).spec) == []


@pytest.mark.parametrize(
    ("cost", "missing"),
    [
        ("Cost: instant.", "a typical result size"),
        ("Cost: a few hundred characters.", "a typical latency"),
        ("Cost: cheap.", "a typical latency or a typical result size"),
    ],
)
def test_a_cost_without_latency_or_size_says_which_is_missing(cost: str, missing: str) -> None:
    description = GOOD_DESCRIPTION.replace("Cost: about 300 ms; under 1,000 characters.", cost)
    findings = lint_tool(make_tool(description, examples=({"city": "Paris"},)))
    assert rules(findings) == ["cost"]
    assert f"does not give {missing}." in findings[0].message


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("Use it when", "Call it when", "when-to-use"),
        ("It cannot forecast", "It will forecast", "limits"),
        ("Result: {", "Shape {", "result"),
    ],
)
def test_each_part_is_required(old: str, new: str, rule: str) -> None:
    tool_ = make_tool(GOOD_DESCRIPTION.replace(old, new), examples=({"city": "Paris"},))
    assert rules(lint_tool(tool_)) == [rule]


@pytest.mark.parametrize(
    "sentence",
    ["Returns the forecast.", "Result, inline: the forecast.", "Result with days=3: a list."],
)
def test_a_result_part_may_start_with_returns_or_a_qualified_result(sentence: str) -> None:
    description = GOOD_DESCRIPTION.replace(
        'Result: {"city": "Paris", "days": [{"date": "2025-06-02", "high_c": 24}]}.', sentence
    )
    assert lint_tool(make_tool(description, examples=({"city": "Paris"},))) == []


def test_use_it_in_the_middle_of_a_sentence_does_not_count() -> None:
    description = GOOD_DESCRIPTION.replace("Use it when", "You may Use it when")
    assert rules(lint_tool(make_tool(description, examples=({"city": "Paris"},)))) == [
        "when-to-use"
    ]


def test_examples_must_validate_against_the_schema() -> None:
    findings = lint_tool(
        make_tool(examples=({"city": "Paris"}, {"town": "Lyon"}, {"city": "Nice", "days": 0}))
    )
    assert rules(findings) == ["example-valid", "example-valid"]
    assert '{"town": "Lyon"}' in findings[0].message
    assert "'city' is a required property" in findings[0].message
    assert "`days`: 0 is less than the minimum of 1" in findings[1].message


def test_more_than_five_examples_is_a_finding() -> None:
    examples = tuple({"city": c} for c in ("A", "B", "C", "D", "E", "F"))
    findings = lint_tool(make_tool(examples=examples))
    assert rules(findings) == ["examples"]
    assert "6 example calls" in findings[0].message


# --- MCP tool definitions ------------------------------------------------------------------------


def test_an_mcp_definition_takes_its_examples_from_an_examples_section() -> None:
    description = GOOD_DESCRIPTION + '\n\nExamples:\n{"city": "Paris"}\n{"city": "Lyon", "days": 3}'
    assert lint_definition("forecast", description, GOOD_SCHEMA) == []
    # The bridge appends the section right after the text, without a blank line.
    assert (
        lint_definition("forecast", GOOD_DESCRIPTION + '\nExamples:\n{"city": "P"}', GOOD_SCHEMA)
        == []
    )


def test_an_mcp_definition_without_examples_or_with_bad_ones_gets_findings() -> None:
    assert rules(lint_definition("forecast", GOOD_DESCRIPTION, GOOD_SCHEMA)) == ["examples"]
    broken = GOOD_DESCRIPTION + '\n\nExamples:\ncity=Paris\n{"city": 3}'
    findings = lint_definition("forecast", broken, GOOD_SCHEMA)
    assert rules(findings) == ["example-valid", "example-valid"]
    assert "'city=Paris' is not a JSON object" in findings[0].message
    assert "`city`: 3 is not of type 'string'" in findings[1].message


@pytest.mark.parametrize(
    ("pname", "prop", "fitting"),
    [
        ("unit", {"type": "string", "enum": ["celsius", "fahrenheit"]}, "e.g. 'celsius'."),
        ("recursive", {"type": "boolean"}, "e.g. true."),
        ("path", {"type": "string"}, "e.g. 'docs/notes.md'."),
        ("output_dir", {"type": "string"}, "e.g. 'src'."),
        ("days", {"type": "integer", "minimum": 1, "maximum": 7}, "e.g. 4."),
        ("limit", {"type": "integer", "minimum": 1, "maximum": 100}, "e.g. 10."),
        ("retries", {"type": "integer", "default": 3}, "e.g. 3."),
        ("since", {"type": "string", "format": "date"}, "e.g. '2026-01-31'."),
        (
            "filter",
            {
                "type": "object",
                "properties": {"state": {"enum": ["open", "closed"]}, "label": {"type": "string"}},
                "required": ["state"],
            },
            'e.g. {"state": "open"}.',
        ),
        ("tags", {"type": "array", "items": {"enum": ["bug", "docs"]}}, 'e.g. ["bug"].'),
    ],
)
def test_parameter_advice_gives_an_example_that_fits_the_parameter(
    pname: str, prop: dict[str, Any], fitting: str
) -> None:
    for described in ({**prop, "description": "What it is."}, prop):
        schema = {"type": "object", "properties": {pname: described}}
        [finding] = [
            f
            for f in lint_definition("t", GOOD_DESCRIPTION, schema)
            if f.rule == "parameter-example"
        ]
        assert fitting in finding.message, finding.message
        # Never an example taken from another tool.
        assert "e.g. 20." not in finding.message and "frontend" not in finding.message


@pytest.mark.parametrize(
    ("pname", "prop"),
    [
        ("code", {"type": "string", "pattern": "^[A-Z]{3}$"}),
        ("query", {"type": "string"}),
        ("options", {"type": "object"}),
        ("profile", {"type": "string"}),  # "file" inside another word is not a file
    ],
)
def test_parameter_advice_says_so_when_the_schema_suggests_no_example(
    pname: str, prop: dict[str, Any]
) -> None:
    schema = {"type": "object", "properties": {pname: {**prop, "description": "What it is."}}}
    [finding] = [
        f for f in lint_definition("t", GOOD_DESCRIPTION, schema) if f.rule == "parameter-example"
    ]
    assert "e.g. <a value it accepts>" in finding.message
    assert "no example is suggested" in finding.message


def test_example_call_advice_is_a_call_the_schema_accepts() -> None:
    [finding] = lint_definition("forecast", GOOD_DESCRIPTION, GOOD_SCHEMA)
    assert finding.rule == "examples"
    # `city` is required and its schema tells no value; no call is invented.
    assert "task_id" not in finding.message
    assert finding.message.endswith('e.g. {"city": …} with a value the tool accepts for each.')
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file, e.g. 'a.txt'."},
            "lines": {"type": "integer", "minimum": 1, "description": "How many, e.g. 5."},
        },
        "required": ["path"],
    }
    [finding] = lint_definition("head", GOOD_DESCRIPTION, schema)
    assert finding.message.endswith('e.g. {"path": "docs/notes.md"}.')


def test_a_missing_description_misses_every_part() -> None:
    findings = lint_definition("nothing", None, {"type": "object", "properties": {}})
    assert rules(findings) == ["when-to-use", "limits", "result", "cost", "examples"]


def test_lint_definitions_accepts_mappings_and_definition_objects() -> None:
    description = GOOD_DESCRIPTION + '\nExamples:\n{"city": "Paris"}'
    mapping = {"name": "forecast", "description": description, "inputSchema": GOOD_SCHEMA}
    ours = ToolDefinition("forecast", description, GOOD_SCHEMA)
    assert lint_definitions([mapping, ours]) == []
    with pytest.raises(UserError, match="is not a tool definition"):
        lint_definitions([{"description": "no name"}])


def test_every_rule_is_documented() -> None:
    from wakeful.tools import lint

    assert lint.__doc__ is not None
    for rule in RULES:
        assert f"``{rule}``" in lint.__doc__


# --- the command ---------------------------------------------------------------------------------


def test_lint_without_arguments_checks_the_built_in_tools_and_passes() -> None:
    result = cli("lint")
    assert result.exit_code == 0, result.output
    assert f"core tools: {len(core_tools())} tools checked" in result.output


def test_lint_json_lists_each_source_with_its_tools() -> None:
    result = cli("lint", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["findings"] == 0
    assert "run_shell" in report["sources"][0]["tools"]


def test_lint_fails_when_a_built_in_tool_misses_a_part(monkeypatch: pytest.MonkeyPatch) -> None:
    from wakeful.cli import tools as cli_tools
    from wakeful.cli.tools import BuiltinToolSource, LintReport

    async def bare_source() -> LintReport:
        return LintReport("bare", [bare.name], lint_tool(bare))

    monkeypatch.setattr(
        cli_tools,
        "BUILTIN_TOOL_SOURCES",
        [*BUILTIN_TOOL_SOURCES, BuiltinToolSource("bare", bare_source)],
    )
    result = cli("lint")
    assert result.exit_code == 1
    assert "bare: 7 findings" in result.output
    assert "bare: 1 tools checked, 0 meet the standard, 1 do not." in result.output


@pytest.mark.slow
def test_lint_a_third_party_server_prints_findings_as_advice() -> None:
    result = cli("lint", "--", sys.executable, str(LINT_SERVER))
    assert result.exit_code == 0, result.output
    assert "3 tools checked, 1 meet the standard, 2 do not." in result.output
    assert "echo" in result.output and "when-to-use" in result.output
    assert "count_words" in result.output and "example-valid" in result.output
    assert "--strict makes them fail" in result.output


@pytest.mark.slow
def test_lint_strict_fails_on_a_third_party_finding_and_json_has_them_all() -> None:
    result = cli("lint", "--strict", "--json", "--", sys.executable, str(LINT_SERVER))
    assert result.exit_code == 1
    report = json.loads(result.output)
    findings = report["sources"][0]["findings"]
    assert {(f["tool"], f["rule"]) for f in findings} == {
        ("echo", "when-to-use"),
        ("echo", "limits"),
        ("echo", "result"),
        ("echo", "cost"),
        ("echo", "parameter-example"),
        ("echo", "examples"),
        ("count_words", "example-valid"),
    }


def test_lint_a_command_that_does_not_exist_is_a_clear_error() -> None:
    result = cli("lint", "--", "wakeful-no-such-server-xyz", "--stdio")
    assert result.exit_code == 1
    assert "The server command 'wakeful-no-such-server-xyz' was not found" in result.output


@pytest.mark.slow
def test_lint_a_server_that_exits_at_once_quotes_its_stderr() -> None:
    script = "import sys; print('no config file', file=sys.stderr); sys.exit(2)"
    result = cli("lint", "--", sys.executable, "-c", script)
    assert result.exit_code == 1
    assert "could not be queried" in result.output
    assert "Its stderr ends with:\nno config file" in result.output


@pytest.mark.slow
def test_lint_a_server_that_never_answers_times_out() -> None:
    script = "import time; time.sleep(30)"
    result = cli("lint", "--timeout", "0.5", "--", sys.executable, "-c", script)
    assert result.exit_code == 1
    assert "did not list its tools within 0.5 seconds" in result.output


def test_the_main_cli_lints_every_built_in_tool() -> None:
    from typer.testing import CliRunner

    from wakeful.cli import app

    result = CliRunner().invoke(app, ["tools", "lint"])
    assert result.exit_code == 0, result.output
    assert "0 do not" in result.output
