"""The tool description standard, and the checker that holds tools to it.

A model picks and calls a tool from its description alone, so each description must answer the
questions a model has before calling. The standard, one rule per question (the rule ids are what
:class:`LintFinding` reports):

``when-to-use``
    A sentence that starts with "Use it" or "Use this" says when to call the tool. A sentence
    starts at the beginning of the text, of a line, or after ``.``, ``!`` or ``?`` and a space.
``limits``
    The description says what the tool cannot do or does not accept: it contains "cannot",
    "does not" or "doesn't" (any case; ``'`` or ``’``).
``result``
    The shape of the result: a sentence that starts with "Returns", or with "Result" and a colon
    within its first 40 characters ("Result:", "Result, inline:", "Result with x=True:").
``cost``
    A sentence that starts with "Cost:" and names both a typical latency (a duration such as
    "instant", "a few milliseconds", "2 s", "as long as the command runs") and a typical size
    (in characters, bytes, KB/MB, tokens, lines or words). The cost part runs from "Cost:" to
    the end of its paragraph.
``parameter-example``
    Each top-level parameter (``inputSchema.properties``) has a description that contains a
    concrete example value introduced by "e.g.", as in "The directory, e.g. 'frontend'.".
``examples``
    The tool has 1 to 5 example calls. For a :class:`ToolSpec` they are ``ToolSpec.examples``;
    an MCP tool definition has no such field, so its description ends with an ``Examples:``
    section: a line that is exactly ``Examples:``, then one JSON object per line up to the next
    blank line or the end.
``example-valid``
    Each example call is a JSON object that validates against the tool's input schema; each
    line of an ``Examples:`` section parses as a JSON object.

Each finding's own example fits the tool it is about: an example value is derived from the
parameter's schema (:mod:`.schema_examples`), an example call from the input schema, and where
the schema suggests none the finding says so instead of inventing one.

Findings are advice for third-party tools and a failure for ours (``wakeful tools lint`` and the
test suite run the checker over every built-in tool).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..errors import UserError
from .schema_examples import example_call, example_value, show_example
from .spec import Tool, ToolSpec

__all__ = [
    "MAX_EXAMPLES",
    "RULES",
    "LintFinding",
    "lint_definition",
    "lint_definitions",
    "lint_tool",
    "parse_examples_section",
]

MAX_EXAMPLES: Final = 5

RULES: Final[tuple[str, ...]] = (
    "when-to-use",
    "limits",
    "result",
    "cost",
    "parameter-example",
    "examples",
    "example-valid",
)

# A sentence starts at the start of the text or a line, or after terminal punctuation (and any
# closing quote or bracket) followed by whitespace.
_SENTENCE_START = r"(?:^[ \t]*|(?<=[.!?])[\"'”’)\]]*\s+)"
_WHEN_TO_USE = re.compile(_SENTENCE_START + r"Use (?:it|this)\b", re.MULTILINE)
_LIMITS = re.compile(r"\b(?:cannot|does not|doesn['’]t)\b", re.IGNORECASE)
_RESULT = re.compile(_SENTENCE_START + r"(?:Returns\b|Result\b[^\n.]{0,40}:)", re.MULTILINE)
_COST = re.compile(_SENTENCE_START + r"Cost:", re.MULTILINE)
_LATENCY = re.compile(
    r"\b(?:instant(?:ly|aneous)?|immediate(?:ly)?|\d+(?:\.\d+)?\s*(?:ms|s|min|h)\b|"
    r"(?:micro|milli)?seconds?|minutes?|hours?|as long as)",
    re.IGNORECASE,
)
_SIZE = re.compile(
    r"\b(?:characters?|chars|bytes?|[kKMG]i?B|tokens?|lines?|words?)\b",
)
_EXAMPLE_VALUE = re.compile(r"\be\.g\.\s*\S")
_EXAMPLES_HEADER = "Examples:"


@dataclass(frozen=True, slots=True)
class LintFinding:
    """One part of the standard a tool misses: which tool, which rule, and what to add."""

    tool: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.tool}: [{self.rule}] {self.message}"


def lint_tool(tool: Tool | ToolSpec) -> list[LintFinding]:
    """Check one of our tools (its description, parameters and `examples`) against the standard."""
    spec = tool.spec if isinstance(tool, Tool) else tool
    findings = _lint_text(spec.name, spec.description, spec.input_schema)
    findings += _lint_examples(spec.name, list(spec.examples), spec.input_schema, where="examples")
    return findings


def lint_definition(
    name: str, description: str | None, input_schema: Mapping[str, Any]
) -> list[LintFinding]:
    """Check an MCP tool definition; its example calls come from an ``Examples:`` section."""
    text = description or ""
    examples, bad_lines = parse_examples_section(text)
    findings = _lint_text(name, _without_examples_section(text), input_schema)
    for line in bad_lines:
        findings.append(
            LintFinding(
                name,
                "example-valid",
                f"The Examples: line {line!r} is not a JSON object. Write each example call as "
                f"one JSON object on its own line{_call_example(input_schema)}.",
            )
        )
    if bad_lines and not examples:
        return findings  # the examples are there, only malformed; one finding per line is enough
    findings += _lint_examples(name, examples, input_schema, where="an Examples: section")
    return findings


def lint_definitions(definitions: Iterable[object]) -> list[LintFinding]:
    """Check MCP tool definitions: mappings with `name`, `description` and `inputSchema`, or
    objects with `name`, `description` and `input_schema`/`inputSchema`/`parameters` attributes
    (an `mcp.types.Tool`, a :class:`wakeful.models.base.ToolDefinition`)."""
    findings: list[LintFinding] = []
    for definition in definitions:
        name, description, schema = _definition_fields(definition)
        findings += lint_definition(name, description, schema)
    return findings


def parse_examples_section(description: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The example calls of an ``Examples:`` section, and the lines of it that are not objects.

    The section is a line that is exactly ``Examples:`` (surrounding spaces allowed), then one
    JSON object per line until a blank line or the end of the text.
    """
    lines = description.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == _EXAMPLES_HEADER)
    except StopIteration:
        return [], []
    examples: list[dict[str, Any]] = []
    bad: list[str] = []
    for line in lines[start + 1 :]:
        text = line.strip()
        if not text:
            break
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            examples.append(value)
        else:
            bad.append(text)
    return examples, bad


# --- the checks ----------------------------------------------------------------------------------


def _lint_text(name: str, description: str, input_schema: Mapping[str, Any]) -> list[LintFinding]:
    findings: list[LintFinding] = []

    def miss(rule: str, message: str) -> None:
        findings.append(LintFinding(name, rule, message))

    if not _WHEN_TO_USE.search(description):
        miss(
            "when-to-use",
            "The description does not say when to use the tool. Add a sentence starting "
            "'Use it' or 'Use this', e.g. 'Use it to check on a background command without "
            "waiting for it.'",
        )
    if not _LIMITS.search(description):
        miss(
            "limits",
            "The description does not say what the tool cannot do or does not accept. Add a "
            "sentence with 'cannot' or 'does not', e.g. 'It cannot read files outside the "
            "workspace.'",
        )
    if not _RESULT.search(description):
        miss(
            "result",
            "The description does not show the shape of the result. Add a sentence starting "
            "'Result:' or 'Returns' that names what comes back and its fields, e.g. 'Returns "
            'the matching <things> as a list of {"<field>": <value>}.\'',
        )
    findings += _lint_cost(name, description)
    findings += _lint_parameters(name, input_schema)
    return findings


def _lint_cost(name: str, description: str) -> list[LintFinding]:
    match = _COST.search(description)
    example = "e.g. 'Cost: instant; a few hundred characters.'"
    if match is None:
        return [
            LintFinding(
                name,
                "cost",
                "The description does not say what a call costs. Add a sentence starting "
                f"'Cost:' with its typical latency and result size, {example}",
            )
        ]
    part = description[match.end() :].split("\n\n", 1)[0]
    missing = [
        what
        for what, pattern in (("a typical latency", _LATENCY), ("a typical result size", _SIZE))
        if not pattern.search(part)
    ]
    if not missing:
        return []
    return [
        LintFinding(
            name,
            "cost",
            f"The 'Cost:' part ({_quote(part)}) does not give {' or '.join(missing)}. Name both, "
            f"{example}",
        )
    ]


def _lint_parameters(name: str, input_schema: Mapping[str, Any]) -> list[LintFinding]:
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    findings: list[LintFinding] = []
    for pname, prop in properties.items():
        description = prop.get("description") if isinstance(prop, Mapping) else None
        example = example_value(str(pname), prop)
        if not isinstance(description, str) or not description.strip():
            stem = "The " + str(pname).replace("_", " ")
            advice = (
                f"e.g. '{stem}, e.g. {show_example(example)}.'"
                if example is not None
                else f"as in '{stem}, e.g. <a value it accepts>.' ({_no_example(prop)})"
            )
            findings.append(
                LintFinding(
                    name,
                    "parameter-example",
                    f"Parameter {pname!r} has no description. Describe it and give an example "
                    f"value introduced by 'e.g.', {advice}",
                )
            )
        elif not _EXAMPLE_VALUE.search(description):
            advice = (
                f"e.g. '…, e.g. {show_example(example)}.'"
                if example is not None
                else f"as in '…, e.g. <a value it accepts>.' ({_no_example(prop)})"
            )
            findings.append(
                LintFinding(
                    name,
                    "parameter-example",
                    f"The description of parameter {pname!r} ({_quote(description)}) gives no "
                    f"example value. Add one introduced by 'e.g.', {advice}",
                )
            )
    return findings


def _no_example(schema: object) -> str:
    """Why no example is suggested: what the schema says, and that it suggests no value."""
    if not isinstance(schema, Mapping):
        return "its schema says nothing about it, so no example is suggested"
    what = []
    kind = schema.get("type")
    if isinstance(kind, str):
        what.append(f"a {kind}")
    if isinstance(schema.get("pattern"), str):
        what.append(f"matching {schema['pattern']!r}")
    if isinstance(schema.get("format"), str):
        what.append(f"in format {schema['format']!r}")
    said = f"its schema only says {' '.join(what)}" if what else "its schema gives no type"
    return f"{said}, so no example is suggested"


def _call_example(input_schema: Mapping[str, Any]) -> str:
    """', e.g. {…}' with a call the input schema accepts, or what to write when none is known."""
    call = example_call(input_schema)
    if call is not None:
        return f", e.g. {json.dumps(call, ensure_ascii=False)}"
    properties = input_schema.get("properties")
    names = [str(n) for n in input_schema.get("required", [])]
    if not names and isinstance(properties, Mapping):
        names = [str(n) for n in list(properties)[:1]]
    if not names:
        return ", e.g. {}"
    # The schema tells no values: the shape with the real names, the values left to the author.
    shape = ", ".join(f'"{n}": …' for n in names)
    return f", e.g. {{{shape}}} with a value the tool accepts for each"


def _lint_examples(
    name: str, examples: Sequence[object], input_schema: Mapping[str, Any], *, where: str
) -> list[LintFinding]:
    if not examples:
        how = (
            "pass examples=({...},) to @tool"
            if where == "examples"
            else "end the description with a line 'Examples:' and one JSON object per line"
        )
        return [
            LintFinding(
                name,
                "examples",
                f"The tool has no example calls. Add 1 to {MAX_EXAMPLES}: {how}"
                f"{_call_example(input_schema)}.",
            )
        ]
    findings: list[LintFinding] = []
    if len(examples) > MAX_EXAMPLES:
        findings.append(
            LintFinding(
                name,
                "examples",
                f"The tool has {len(examples)} example calls in {where}; keep at most "
                f"{MAX_EXAMPLES}, the ones that show different uses, e.g. one per parameter "
                "that changes what the tool does.",
            )
        )
    try:
        validator = Draft202012Validator(dict(input_schema))
        validator.check_schema(dict(input_schema))
    except SchemaError as exc:
        findings.append(
            LintFinding(
                name,
                "example-valid",
                f"The input schema is not a valid JSON schema ({exc.message}), so no example "
                'can be checked. Fix the schema, e.g. {"type": "object", "properties": {}}.',
            )
        )
        return findings
    for example in examples:
        if not isinstance(example, dict):
            findings.append(
                LintFinding(
                    name,
                    "example-valid",
                    f"The example call {example!r} is not a JSON object. Write the arguments "
                    f"as an object{_call_example(input_schema)}.",
                )
            )
            continue
        errors = sorted(validator.iter_errors(example), key=lambda e: list(e.absolute_path))
        if errors:
            reasons = "; ".join(_describe_schema_error(e.message, e.absolute_path) for e in errors)
            findings.append(
                LintFinding(
                    name,
                    "example-valid",
                    f"The example call {json.dumps(example, ensure_ascii=False)} does not match "
                    f"the input schema: {reasons}. Fix the example (or the schema) so that it is "
                    "a call the tool accepts.",
                )
            )
    return findings


# --- small pieces --------------------------------------------------------------------------------


def _describe_schema_error(message: str, path: Iterable[object]) -> str:
    where = ".".join(str(p) for p in path)
    return f"`{where}`: {message}" if where else message


def _quote(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return repr(line if len(line) <= limit else line[: limit - 1] + "…")


def _without_examples_section(description: str) -> str:
    lines = description.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == _EXAMPLES_HEADER:
            rest = lines[i + 1 :]
            end = next((j for j, x in enumerate(rest) if not x.strip()), len(rest))
            return "\n".join(lines[:i] + rest[end:])
    return description


def _definition_fields(definition: object) -> tuple[str, str | None, Mapping[str, Any]]:
    if isinstance(definition, Mapping):
        name = definition.get("name")
        description = definition.get("description")
        schema = definition.get("inputSchema", definition.get("input_schema"))
    else:
        name = getattr(definition, "name", None)
        description = getattr(definition, "description", None)
        schema = next(
            (
                getattr(definition, attr)
                for attr in ("input_schema", "inputSchema", "parameters")
                if hasattr(definition, attr)
            ),
            None,
        )
    if not isinstance(name, str) or not isinstance(schema, Mapping):
        raise UserError(
            f"{definition!r} is not a tool definition: it needs a string `name` and an input "
            "schema object (`inputSchema`). Pass MCP tool definitions, e.g. the `tools` of "
            "`await client.list_tools()`."
        )
    if description is not None and not isinstance(description, str):
        raise UserError(
            f"The description of tool {name!r} is a {type(description).__name__}, not a "
            "string. Pass the definition as the server listed it."
        )
    return name, description, schema
