"""Hypothesis strategies for the values a JSON schema accepts, and a few drawn deterministically.

The strategy reads the parts of JSON Schema that tool input schemas use: `type` (one or a list),
`const`, `enum`, `anyOf`/`oneOf`, local `$ref`s into `$defs`, string lengths, `pattern` and a
few `format`s, number bounds (inclusive and exclusive), arrays with `items` and their sizes, and
objects with `properties`, `required`, `additionalProperties`, `propertyNames` and their sizes.
An empty schema accepts any JSON value. A keyword it cannot honour (`allOf`, `not`, `if`, …)
raises `UnsupportedSchema` rather than yield values the schema might refuse; callers check each
drawn value against the schema anyway.

Strings are drawn from text and, when given, from `known_strings` (names of files in the test's
workspace, say), so that some calls reach past "no such file" into the tool's real work.
Sizes are kept small (`MAX_TEXT`, `MAX_ITEMS`) so a call stays fast whatever the schema allows.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

__all__ = ["UnsupportedSchema", "boundary_arguments", "draw_arguments", "value_strategy"]

MAX_TEXT = 24
"""Characters a drawn string has beyond its schema's minimum (at most)."""

MAX_ITEMS = 3
"""Items a drawn array or extra properties an object has beyond the minimum (at most)."""

_UNSUPPORTED = ("allOf", "not", "if", "then", "else", "dependentSchemas", "patternProperties")

_FORMATS: dict[str, st.SearchStrategy[str]] = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "date-time": st.datetimes().map(lambda d: d.isoformat() + "Z"),
    "time": st.times().map(lambda t: t.isoformat()),
    "email": st.emails(),
    "uri": st.just("http://127.0.0.1:9/docs"),
    "url": st.just("http://127.0.0.1:9/docs"),
}

# JSON text: no lone surrogates (they cannot be encoded), anything else is fair game.
_TEXT_ALPHABET = st.characters(exclude_categories=("Cs",))


class UnsupportedSchema(Exception):
    """The schema uses a keyword this strategy does not honour; extend it to cover the tool."""


def draw_arguments(
    schema: Mapping[str, Any],
    *,
    count: int,
    known_strings: Sequence[str] = (),
    seed_name: str = "",
) -> list[dict[str, Any]]:
    """Up to `count` distinct argument objects for a tool's input schema, the same every run.

    Hypothesis draws them from a seed derived from `seed_name` (a tool's name), so a run is
    reproducible and tools get different draws; each is checked against the schema, so a bug
    here shows as a failure rather than as a tool refusing its input."""
    strategy = value_strategy(schema, schema, known_strings)
    validator = Draft202012Validator(dict(schema))
    drawn: dict[str, dict[str, Any]] = {}

    @seed(zlib.crc32(seed_name.encode()))
    @settings(
        max_examples=count * 4,
        database=None,
        phases=(Phase.generate,),
        deadline=None,
        suppress_health_check=(
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ),
    )
    @given(value=strategy)
    def collect(value: Any) -> None:
        errors = [error.message for error in validator.iter_errors(value)]
        if errors:
            raise AssertionError(
                f"The strategy drew {value!r}, which the schema refuses: {errors}. Fix "
                "schema_arguments for this schema."
            )
        drawn.setdefault(json.dumps(value, sort_keys=True), value)
        if len(drawn) >= count:
            raise _Enough

    # Stopping early is a "failure" to Hypothesis; here it means enough values were drawn.
    with contextlib.suppress(_Enough):
        collect()
    return list(drawn.values())


class _Enough(Exception):
    """Raised inside the Hypothesis run once enough distinct values are drawn."""


def value_strategy(
    schema: object, root: Mapping[str, Any], known_strings: Sequence[str] = ()
) -> st.SearchStrategy[Any]:
    """Values `schema` accepts (`root` resolves its `$ref`s)."""
    if schema is True or schema == {}:
        return _any_json()
    if not isinstance(schema, Mapping):
        raise UnsupportedSchema(f"A schema must be an object or true, got {schema!r}.")
    used = [keyword for keyword in _UNSUPPORTED if keyword in schema]
    if used:
        raise UnsupportedSchema(f"The keywords {used} are not supported (in {schema!r}).")
    if "$ref" in schema:
        return value_strategy(_resolve(schema["$ref"], root), root, known_strings)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            options = [value_strategy(option, root, known_strings) for option in schema[keyword]]
            if keyword == "oneOf":
                validator = Draft202012Validator(dict(schema))
                return st.one_of(options).filter(validator.is_valid)
            return st.one_of(options)
    kinds = schema.get("type")
    if kinds is None:
        kinds = "object" if "properties" in schema else None
    if kinds is None:
        return _any_json()
    if isinstance(kinds, list):
        return st.one_of([_typed(kind, schema, root, known_strings) for kind in kinds])
    return _typed(str(kinds), schema, root, known_strings)


def _typed(
    kind: str, schema: Mapping[str, Any], root: Mapping[str, Any], known: Sequence[str]
) -> st.SearchStrategy[Any]:
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low = _bound(schema, "minimum", "exclusiveMinimum", 1)
        high = _bound(schema, "maximum", "exclusiveMaximum", -1)
        return st.integers(
            min_value=None if low is None else int(low),
            max_value=None if high is None else int(high),
        )
    if kind == "number":
        return st.floats(
            min_value=schema.get("minimum", schema.get("exclusiveMinimum")),
            max_value=schema.get("maximum", schema.get("exclusiveMaximum")),
            exclude_min="minimum" not in schema and "exclusiveMinimum" in schema,
            exclude_max="maximum" not in schema and "exclusiveMaximum" in schema,
            allow_nan=False,
            allow_infinity=False,
        )
    if kind == "string":
        return _string(schema, known)
    if kind == "array":
        items = value_strategy(schema.get("items", True), root, known)
        low = int(schema.get("minItems", 0))
        high = min(int(schema.get("maxItems", low + MAX_ITEMS)), low + MAX_ITEMS)
        return st.lists(items, min_size=low, max_size=high, unique=bool(schema.get("uniqueItems")))
    if kind == "object":
        return _object(schema, root, known)
    raise UnsupportedSchema(f"Unknown type {kind!r} in {schema!r}.")


def _bound(schema: Mapping[str, Any], inclusive: str, exclusive: str, step: int) -> float | None:
    if isinstance(schema.get(inclusive), int | float):
        return float(schema[inclusive])
    if isinstance(schema.get(exclusive), int | float):
        return float(schema[exclusive]) + step
    return None


def _string(schema: Mapping[str, Any], known: Sequence[str]) -> st.SearchStrategy[str]:
    low = int(schema.get("minLength", 0))
    high = min(int(schema.get("maxLength", low + MAX_TEXT)), low + MAX_TEXT)
    pattern = schema.get("pattern")
    fmt = schema.get("format")
    drawn: st.SearchStrategy[str]
    if isinstance(pattern, str):
        # JSON Schema patterns search anywhere in the string, as re.search does.
        drawn = st.from_regex(pattern, fullmatch=True, alphabet=_TEXT_ALPHABET)
    elif isinstance(fmt, str) and fmt in _FORMATS:
        drawn = _FORMATS[fmt]
    else:
        drawn = st.text(_TEXT_ALPHABET, min_size=low, max_size=high)
    if known:
        drawn = st.one_of(st.sampled_from(list(known)), drawn)

    def fits(text: str) -> bool:
        if not low <= len(text) <= int(schema.get("maxLength", len(text))):
            return False
        return not isinstance(pattern, str) or re.search(pattern, text) is not None

    return drawn.filter(fits)


def _object(
    schema: Mapping[str, Any], root: Mapping[str, Any], known: Sequence[str]
) -> st.SearchStrategy[dict[str, Any]]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = [name for name in schema.get("required", []) if name in properties]
    missing = [name for name in schema.get("required", []) if name not in properties]
    if missing:
        raise UnsupportedSchema(f"Required names without a property schema: {missing}.")
    fixed = st.fixed_dictionaries(
        {name: value_strategy(properties[name], root, known) for name in required},
        optional={
            name: value_strategy(sub, root, known)
            for name, sub in properties.items()
            if name not in required
        },
    )
    extra_schema = schema.get("additionalProperties", True)
    low = int(schema.get("minProperties", 0))
    high = int(schema.get("maxProperties", len(properties) + low + MAX_ITEMS))
    if extra_schema is False or (properties and "additionalProperties" not in schema):
        # Properties named and nothing said of others: draw only the named ones.
        return fixed.filter(lambda value: low <= len(value) <= high)
    names = value_strategy(schema.get("propertyNames", {"type": "string"}), root, known)
    extras = st.dictionaries(
        names.filter(lambda name: isinstance(name, str) and name not in properties),
        value_strategy(extra_schema, root, known),
        min_size=max(0, low - len(required)),
        max_size=max(0, min(high - len(required), low + MAX_ITEMS)),
    )
    merged = st.tuples(fixed, extras).map(lambda pair: {**pair[1], **pair[0]})
    return merged.filter(lambda value: low <= len(value) <= high)


def _any_json() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.text(_TEXT_ALPHABET, max_size=MAX_TEXT)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=MAX_ITEMS)
            | st.dictionaries(st.text(_TEXT_ALPHABET, max_size=8), inner, max_size=MAX_ITEMS)
        ),
        max_leaves=6,
    )


def _resolve(reference: object, root: Mapping[str, Any]) -> object:
    if not isinstance(reference, str) or not reference.startswith("#/"):
        raise UnsupportedSchema(
            f"Only local references ('#/$defs/…') are supported: {reference!r}."
        )
    found: object = root
    for part in reference[2:].split("/"):
        if not isinstance(found, Mapping) or part not in found:
            raise UnsupportedSchema(f"The reference {reference!r} points nowhere in the schema.")
        found = found[part]
    return found


# --- boundaries ----------------------------------------------------------------------------------

_EDGE_TIMES = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00")
_EDGE_DATES = ("0001-01-01", "9999-12-31")


def boundary_arguments(
    schema: Mapping[str, Any],
    base: Mapping[str, Any],
    seen: Mapping[str, Sequence[Any]] | None = None,
) -> list[dict[str, Any]]:
    """Variants of the valid call `base`, each with one top-level argument moved to an edge of
    its kind, that the schema still accepts: an empty, NUL-holding or non-ASCII string (the
    earliest and latest times where the base value is a date or time), the bounds of a number
    (or very large ones where there is none), each enum value, an empty or one-more-item list.

    `seen` holds other values each argument was given (in the tool's other examples): a string
    argument any of them shows to be a date or time gets the edge times too.

    Random draws rarely reach such values with the other arguments right; starting from a
    call that works (a tool's own example) and moving one argument does."""
    seen = seen or {}
    validator = Draft202012Validator(dict(schema))
    properties: Mapping[str, Any] = schema.get("properties", {})
    # An argument the base leaves out may exclude one it holds (set_timer's `at` and
    # `delay_seconds`), so it is also tried with the required arguments alone.
    required = {k: v for k, v in base.items() if k in schema.get("required", [])}
    variants: dict[str, dict[str, Any]] = {}
    for name, sub in properties.items():
        starts = [dict(base)] if name in base else [dict(base), required]
        for value in _edges(sub, [base.get(name), *seen.get(name, ())]):
            for start in starts:
                variant = {**start, name: value}
                if variant != dict(base) and validator.is_valid(variant):
                    variants.setdefault(json.dumps(variant, sort_keys=True), variant)
    return list(variants.values())


def _edges(schema: object, values: list[Any]) -> list[Any]:
    """Edge values for `schema`; `values` are those the argument had (the base's first)."""
    if not isinstance(schema, Mapping):
        return []
    current = values[0] if values else None
    found: list[Any] = list(schema.get("enum", []))
    for keyword in ("anyOf", "oneOf"):
        for option in schema.get(keyword, []):
            found.extend(_edges(option, values))
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "string":
            texts = [v for v in values if isinstance(v, str)]
            found.extend(_string_edges(texts[0] if texts else "", texts))
        elif kind in ("integer", "number"):
            found.extend(_number_edges(schema, integer=kind == "integer"))
        elif kind == "boolean":
            found.extend([True, False])
        elif kind == "null":
            found.append(None)
        elif kind == "array":
            items = schema.get("items", {})
            listed = list(current) if isinstance(current, list) else []
            found.append([])
            found.extend([*listed, edge] for edge in _edges(items, listed[:1]))
    return found


def _string_edges(current: str, texts: list[str]) -> list[str]:
    edges = ["", "\x00", f"{current}\x00", f"{current}é€😀", " " * 3]
    for text in texts:
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            continue
        has_time = "T" in text or " " in text.strip()
        edges.extend(_EDGE_TIMES if has_time else _EDGE_DATES)
        if has_time and parsed.tzinfo is None:
            edges.extend(t[:19] for t in _EDGE_TIMES)
    return edges


def _number_edges(schema: Mapping[str, Any], *, integer: bool) -> list[float]:
    low = _bound(schema, "minimum", "exclusiveMinimum", 1)
    high = _bound(schema, "maximum", "exclusiveMaximum", -1)
    edges: list[float] = [0, 1, -1]
    edges.append(low if low is not None else -(2**63) if integer else -1e308)
    edges.append(high if high is not None else 2**63 if integer else 1e308)
    if not integer:
        edges.append(5e-324)
    return [int(e) if integer else e for e in edges]
