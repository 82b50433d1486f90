"""Example values derived from a JSON schema, for advice that must fit the parameter it is about.

The description linter tells tool authors to add example values; an example it suggests has to
be one the parameter accepts. :func:`example_value` derives one from the parameter's own schema
(``const``, ``examples``, ``default``, ``enum``, type, bounds, ``format``, and for a few telling
names such as ``path`` or ``url`` a value of that kind) and checks it against the schema; where
nothing fits (a ``pattern`` it cannot satisfy, an unknown object) it returns None, so that the
advice says there is none rather than inventing one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

__all__ = ["Example", "example_call", "example_value", "show_example"]

_FORMATS: dict[str, str] = {
    "date": "2026-01-31",
    "date-time": "2026-01-31T09:30:00Z",
    "time": "09:30:00",
    "email": "ada@example.com",
    "uri": "https://example.com/docs",
    "url": "https://example.com/docs",
    "iri": "https://example.com/docs",
    "uri-reference": "/docs/intro",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "hostname": "example.com",
    "ipv4": "192.0.2.10",
    "ipv6": "2001:db8::1",
}
# Words in a parameter's name that say what kind of string it is; checked in this order.
_NAMED_STRINGS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("url", "uri", "link", "endpoint"), "https://example.com/docs"),
    (("email",), "ada@example.com"),
    (("dir", "directory", "dirname", "folder", "cwd"), "src"),
    (("path", "file", "filename", "filepath"), "docs/notes.md"),
    (("date",), "2026-01-31"),
    (("lang", "language"), "en"),
)
# Words in a number's name that suggest a typical value.
_NAMED_NUMBERS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("port",), 8080),
    (("timeout", "seconds", "delay"), 30),
    (("limit", "count", "max", "size", "top", "results", "lines"), 10),
    (("page", "offset", "index", "start"), 1),
    (("year",), 2026),
)


@dataclass(frozen=True)
class Example:
    """A value the schema accepts (a wrapper, since None is a value too)."""

    value: Any


def example_value(name: str, schema: object) -> Example | None:
    """A value for parameter `name` that its `schema` accepts, or None when none can be told."""
    if not isinstance(schema, Mapping):
        return None
    candidate = _candidate(name, schema)
    if candidate is None or not _accepts(schema, candidate.value):
        return None
    return candidate


def example_call(input_schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """Arguments for a whole call that the input schema accepts: its required parameters (or,
    when none is required, the first one with an example), or None when none can be told."""
    call = _object_example(input_schema, at_least_one=True)
    if call is None or not _accepts(input_schema, call.value):
        return None
    value: dict[str, Any] = call.value
    return value


def show_example(example: Example) -> str:
    """The example as a description would write it: strings in single quotes, else JSON."""
    if isinstance(example.value, str):
        return f"'{example.value}'"
    return json.dumps(example.value, ensure_ascii=False)


# --- deriving ------------------------------------------------------------------------------------


def _candidate(name: str, schema: Mapping[str, Any]) -> Example | None:
    if "const" in schema:
        return Example(schema["const"])
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return Example(examples[0])
    if "default" in schema and schema["default"] is not None:
        return Example(schema["default"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return Example(next((v for v in enum if v is not None), enum[0]))
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if isinstance(options, list):
            for option in options:
                found = example_value(name, option)
                if found is not None and found.value is not None:
                    return found
    kind = _type(schema)
    if kind == "boolean":
        return Example(True)
    if kind in ("integer", "number"):
        return _number(name, schema, integer=kind == "integer")
    if kind == "string":
        return _string(name, schema)
    if kind == "array":
        item = example_value(_singular(name), schema.get("items"))
        return None if item is None else Example([item.value])
    if kind == "object":
        return _object_example(schema, at_least_one=False)
    return None


def _type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and isinstance(schema.get("properties"), Mapping):
        return "object"
    return kind if isinstance(kind, str) else None


def _number(name: str, schema: Mapping[str, Any], *, integer: bool) -> Example | None:
    step = 1 if integer else 0.5
    low = _bound(schema, "minimum", "exclusiveMinimum", step)
    high = _bound(schema, "maximum", "exclusiveMaximum", -step)
    named = next((v for words, v in _NAMED_NUMBERS if _has_word(name, words)), None)
    if named is not None and (low is None or named >= low) and (high is None or named <= high):
        return Example(named)
    if low is not None and high is not None:
        middle = (low + high) / 2
        return Example(int(middle) if integer else middle)
    if low is not None:
        return Example(int(low) if integer else low)
    if high is not None:
        return Example(int(min(high, 1)) if integer else min(high, 1.0))
    return None


def _bound(schema: Mapping[str, Any], inclusive: str, exclusive: str, step: float) -> float | None:
    value = schema.get(inclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    value = schema.get(exclusive)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value + step
    return None


def _string(name: str, schema: Mapping[str, Any]) -> Example | None:
    fmt = schema.get("format")
    if isinstance(fmt, str):
        return Example(_FORMATS[fmt]) if fmt in _FORMATS else None
    if "pattern" in schema:
        return None  # a value that matches an arbitrary pattern cannot be told
    named = next((v for words, v in _NAMED_STRINGS if _has_word(name, words)), None)
    return None if named is None else Example(named)


def _object_example(schema: Mapping[str, Any], *, at_least_one: bool) -> Example | None:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    required = [r for r in schema.get("required", []) if isinstance(r, str)]
    value: dict[str, Any] = {}
    for name in required:
        found = example_value(name, properties.get(name, {}))
        if found is None:
            return None
        value[name] = found.value
    if not value and at_least_one:
        for name, prop in properties.items():
            found = example_value(str(name), prop)
            if found is not None:
                value[str(name)] = found.value
                break
    return Example(value) if value else None


def _has_word(name: str, words: tuple[str, ...]) -> bool:
    """Whether one of the words of `name` (snake_case, kebab-case or camelCase) is in `words`."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " ")
    return any(part in words for part in spaced.lower().split())


def _singular(name: str) -> str:
    return name[:-1] if name.endswith("s") else name


def _accepts(schema: Mapping[str, Any], value: Any) -> bool:
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError:
        return False
    return Draft202012Validator(dict(schema)).is_valid(value)
