"""MCP elicitation: a server that asks this client's user for input gets a person's answer.

A server's `elicitation/create` (or an elicitation embedded in an input-required result) is put
to the user through the runtime's person-asking mechanism (:class:`~wakeful.safety.approvals.
Approvals`): the question names the server first and says that the server, not the agent, asks
— elicitation is a phishing vector, and a person must be able to tell who wants what. A form
(`requestedSchema`) is answered with `/answer ID field=value …`, each value checked against the
schema before anything is sent; a page to open (URL mode) with `/answer ID` once opened. No
answer within the approvals' timeout is a decline, sent to the server and told to the agent.

Only the flat schemas MCP allows are accepted: properties of type string (with `format` date,
date-time, email or uri, length bounds, or `enum`/`oneOf` choices), number, integer, boolean,
and arrays of choices (several of a list). A server that sends anything else is refused with an
error naming the property, and the user is not asked.

The request goes to the session whose tool call caused it: an elicitation embedded in a call's
input-required result belongs to that call; a server-to-client request (older protocol) carries
no call, so it is given to the one call of the server in flight, or when there are several of
one session, to that session, naming them all; otherwise (no call in flight, or calls of several
sessions) it goes to the "main" session, naming no call.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import mcp_types

from ..safety.approvals import Approvals
from ..safety.human_requests import InputOutcome, InvalidAnswer

__all__ = ["CallOrigin", "ElicitationForm", "MCPElicitation", "UnsupportedForm"]

MAIN_SESSION: Final = "main"
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TRUE = frozenset({"true", "yes", "y", "1", "on"})
_FALSE = frozenset({"false", "no", "n", "0", "off"})
_STRING_FORMATS = frozenset({"date", "date-time", "email", "uri"})
_DESCRIPTION_LIMIT = 120

FieldKind = Literal["string", "number", "integer", "boolean", "choice", "choices"]


class UnsupportedForm(ValueError):
    """A requested schema this client cannot put to a person (not one MCP allows)."""


@dataclass(frozen=True)
class _Field:
    """One property of a form: its kind and the rules its value must meet."""

    name: str
    kind: FieldKind
    label: str = ""
    required: bool = False
    default: Any = None
    string_format: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    """The allowed values of a choice; `titles` are the names shown (and accepted) for them."""
    titles: tuple[str, ...] = ()
    min_items: int | None = None
    max_items: int | None = None

    def describe(self) -> str:
        rules = [self._kind_words()]
        if self.required:
            rules.append("required")
        elif self.default is not None:
            rules.append(f"default {self.default}")
        label = f": {self.label}" if self.label else ""
        return f"{self.name}{label} ({', '.join(rules)})"

    def _kind_words(self) -> str:
        if self.kind in ("choice", "choices"):
            shown = [
                f"{value} ({title})" if title and title != value else value
                for value, title in zip(self.choices, self.titles or self.choices, strict=True)
            ]
            each = "one of" if self.kind == "choice" else "any of, separated by commas"
            return f"{each}: {', '.join(shown)}"
        if self.kind == "boolean":
            return "yes or no"
        if self.kind in ("integer", "number"):
            word = "a whole number" if self.kind == "integer" else "a number"
            return word + _bounds(self.minimum, self.maximum)
        words = {
            "date": "a date like 2026-12-24",
            "date-time": "a date and time like 2026-12-24T19:30:00",
            "email": "an email address",
            "uri": "a web address",
        }
        text = words.get(self.string_format or "", "text")
        if self.min_length is not None or self.max_length is not None:
            text += f" of{_bounds(self.min_length, self.max_length)} characters"
        return text

    def example(self) -> str:
        if self.kind in ("choice", "choices"):
            return self.choices[0] if self.choices else "…"
        examples = {"boolean": "yes", "integer": "3", "number": "2.5"}
        if self.kind in examples:
            return examples[self.kind]
        formats = {
            "date": "2026-12-24",
            "date-time": "2026-12-24T19:30:00",
            "email": "name@example.com",
            "uri": "https://example.com",
        }
        return formats.get(self.string_format or "", '"…"')

    def convert(self, raw: str) -> Any:
        """The value of typed text, checked; raises InvalidAnswer."""
        text = raw.strip()
        if self.kind == "boolean":
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise InvalidAnswer(f"{self.name} must be yes or no, not {text!r}.")
        if self.kind == "integer":
            try:
                whole = int(text)
            except ValueError:
                raise InvalidAnswer(f"{self.name} must be a whole number, not {text!r}.") from None
            return self.accept(whole)
        if self.kind == "number":
            try:
                number = float(text)
            except ValueError:
                raise InvalidAnswer(f"{self.name} must be a number, not {text!r}.") from None
            return self.accept(int(number) if number.is_integer() else number)
        if self.kind == "choice":
            return self._choice(text)
        if self.kind == "choices":
            return self.accept([self._choice(part.strip()) for part in text.split(",") if part])
        return self.accept(raw)

    def accept(self, value: Any) -> Any:
        """`value` (of the field's type) when it meets the field's rules; raises InvalidAnswer."""
        name = self.name
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise InvalidAnswer(f"{name} must be yes or no (a boolean), not {value!r}.")
            return value
        if self.kind in ("integer", "number"):
            integral = isinstance(value, int) and not isinstance(value, bool)
            if not integral and (self.kind == "integer" or not isinstance(value, float)):
                raise InvalidAnswer(f"{name} must be {self._kind_words()}, not {value!r}.")
            if (self.minimum is not None and value < self.minimum) or (
                self.maximum is not None and value > self.maximum
            ):
                raise InvalidAnswer(f"{name} must be {self._kind_words()}; {value!r} is not.")
            return value
        if self.kind == "choice":
            if value not in self.choices:
                raise InvalidAnswer(f"{name} must be {self._kind_words()}, not {value!r}.")
            return value
        if self.kind == "choices":
            if not isinstance(value, list) or any(v not in self.choices for v in value):
                raise InvalidAnswer(f"{name} must be {self._kind_words()}, not {value!r}.")
            count = len(value)
            if (self.min_items is not None and count < self.min_items) or (
                self.max_items is not None and count > self.max_items
            ):
                raise InvalidAnswer(
                    f"{name} takes{_bounds(self.min_items, self.max_items)} choices, not {count}."
                )
            return list(value)
        if not isinstance(value, str):
            raise InvalidAnswer(f"{name} must be text, not {value!r}.")
        length = len(value)
        if (self.min_length is not None and length < self.min_length) or (
            self.max_length is not None and length > self.max_length
        ):
            raise InvalidAnswer(
                f"{name} must be{_bounds(self.min_length, self.max_length)} characters long, "
                f"not {length}."
            )
        self._check_format(value)
        return value

    def _choice(self, text: str) -> str:
        for value, title in zip(self.choices, self.titles or self.choices, strict=True):
            if text.lower() in (value.lower(), title.lower()):
                return value
        raise InvalidAnswer(f"{self.name} must be {self._kind_words()}, not {text!r}.")

    def _check_format(self, value: str) -> None:
        problem = {
            "date": "a date like 2026-12-24",
            "date-time": "a date and time like 2026-12-24T19:30:00",
            "email": "an email address like name@example.com",
            "uri": "a web address like https://example.com",
        }
        kind = self.string_format
        if kind is None:
            return
        try:
            if kind == "date":
                date.fromisoformat(value)
            elif kind == "date-time":
                datetime.fromisoformat(value)
            elif (kind == "email" and not _EMAIL.match(value)) or (
                kind == "uri" and not urlsplit(value).scheme
            ):
                raise ValueError(value)
        except ValueError:
            raise InvalidAnswer(f"{self.name} must be {problem[kind]}, not {value!r}.") from None


def _bounds(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" from {low:g} to {high:g}"
    if low is not None:
        return f" of at least {low:g}"
    if high is not None:
        return f" of at most {high:g}"
    return ""


class ElicitationForm:
    """A form-mode elicitation's `requestedSchema` as a form a person fills in by typing
    (an :class:`~wakeful.safety.human_requests.InputForm`)."""

    def __init__(self, fields: list[_Field]) -> None:
        self.fields = {f.name: f for f in fields}

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any]) -> ElicitationForm:
        """The form of a requested schema; UnsupportedForm for one MCP does not allow."""
        if schema.get("type", "object") != "object":
            raise UnsupportedForm(
                f"the requested schema has type {schema.get('type')!r}; MCP elicitation asks "
                'for an object ("type": "object") of flat properties'
            )
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, dict) or not isinstance(required, list):
            raise UnsupportedForm(
                "the requested schema's properties must be an object and required a list"
            )
        fields = [_field(str(name), spec, name in required) for name, spec in properties.items()]
        return cls(fields)

    def describe(self) -> str:
        return "; ".join(f.describe() for f in self.fields.values()) or "none"

    def example(self) -> str:
        return " ".join(f"{f.name}={f.example()}" for f in self.fields.values())

    def parse(self, text: str) -> dict[str, Any]:
        try:
            tokens = shlex.split(text)
        except ValueError as exc:
            raise InvalidAnswer(f"the answer could not be read ({exc}).") from None
        given: dict[str, str] = {}
        if len(self.fields) == 1 and tokens and not any("=" in t for t in tokens):
            # One field: the whole answer is its value, no `name=` needed.
            given[next(iter(self.fields))] = " ".join(tokens)
            tokens = []
        for token in tokens:
            name, equals, value = token.partition("=")
            if not equals:
                raise InvalidAnswer(
                    f"{token!r} is not of the form field=value (fields: {', '.join(self.fields)})."
                )
            if name not in self.fields:
                raise InvalidAnswer(
                    f"there is no field {name!r}; the fields are {', '.join(self.fields)}."
                )
            if name in given:
                raise InvalidAnswer(f"{name} is given twice.")
            given[name] = value
        values = {name: self.fields[name].convert(raw) for name, raw in given.items()}
        return self._complete(values)

    def check(self, values: dict[str, Any]) -> dict[str, Any]:
        unknown = [name for name in values if name not in self.fields]
        if unknown:
            raise InvalidAnswer(
                f"there is no field {unknown[0]!r}; the fields are {', '.join(self.fields)}."
            )
        checked = {
            name: self.fields[name].convert(value)
            if isinstance(value, str) and self.fields[name].kind != "string"
            else self.fields[name].accept(value)
            for name, value in values.items()
        }
        return self._complete(checked)

    def _complete(self, values: dict[str, Any]) -> dict[str, Any]:
        """`values` with the defaults of fields not given; InvalidAnswer when a required one
        is missing."""
        missing = [f.name for f in self.fields.values() if f.required and f.name not in values]
        if missing:
            raise InvalidAnswer(
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required."
            )
        for f in self.fields.values():
            if f.name not in values and f.default is not None:
                values[f.name] = f.default
        return values


def _field(name: str, spec: Any, required: bool) -> _Field:
    """One property of a requested schema; UnsupportedForm when MCP does not allow it."""
    if not isinstance(spec, dict):
        raise UnsupportedForm(f"property {name!r} of the requested schema is not an object")
    kind = spec.get("type")
    label = str(spec.get("description") or spec.get("title") or "")
    label = " ".join(label.split())[:_DESCRIPTION_LIMIT]
    common: dict[str, Any] = {"name": name, "label": label, "required": required}
    default = spec.get("default")
    if kind == "string":
        choices, titles = _choices(spec)
        if choices:
            return _Field(kind="choice", choices=choices, titles=titles, default=default, **common)
        string_format = spec.get("format")
        if string_format is not None and string_format not in _STRING_FORMATS:
            raise UnsupportedForm(
                f"property {name!r} has the string format {string_format!r}; MCP allows "
                f"{', '.join(sorted(_STRING_FORMATS))}"
            )
        return _Field(
            kind="string",
            string_format=string_format,
            min_length=_int(spec, "minLength", name),
            max_length=_int(spec, "maxLength", name),
            default=default,
            **common,
        )
    if kind in ("number", "integer"):
        return _Field(
            kind=kind,
            minimum=_number(spec, "minimum", name),
            maximum=_number(spec, "maximum", name),
            default=default,
            **common,
        )
    if kind == "boolean":
        return _Field(kind="boolean", default=default, **common)
    if kind == "array" and isinstance(spec.get("items"), dict):
        choices, titles = _choices(spec["items"])
        if choices:
            return _Field(
                kind="choices",
                choices=choices,
                titles=titles,
                min_items=_int(spec, "minItems", name),
                max_items=_int(spec, "maxItems", name),
                default=default,
                **common,
            )
    raise UnsupportedForm(
        f"property {name!r} of the requested schema has type {kind!r}; MCP elicitation allows "
        "only flat properties: string, number, integer, boolean, or an array of choices"
    )


def _choices(spec: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The allowed values of an enum property and their titles: `enum` (with the legacy
    `enumNames`), or `oneOf`/`anyOf` of `{const, title}`."""
    if isinstance(spec.get("enum"), list):
        values = tuple(str(v) for v in spec["enum"])
        names = spec.get("enumNames")
        if isinstance(names, list) and len(names) == len(values):
            return values, tuple(str(n) for n in names)
        return values, values
    options = spec.get("oneOf") or spec.get("anyOf")
    if isinstance(options, list) and all(isinstance(o, dict) and "const" in o for o in options):
        values = tuple(str(o["const"]) for o in options)
        return values, tuple(str(o.get("title") or o["const"]) for o in options)
    return (), ()


def _int(spec: Mapping[str, Any], key: str, name: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnsupportedForm(f"property {name!r} has {key} {value!r}, which is not a whole number")
    return value


def _number(spec: Mapping[str, Any], key: str, name: str) -> float | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise UnsupportedForm(f"property {name!r} has {key} {value!r}, which is not a number")
    return float(value)


@dataclass
class CallOrigin:
    """The tool call during which a server asked for input: whose session it is, which tool,
    and what the person was asked and how it ended (told to the agent with the result)."""

    session: str
    tool: str
    asked: list[str] = field(default_factory=list)


class MCPElicitation:
    """Answers one server's elicitation requests by asking a person (see the module's
    docstring); each outcome is noted on the call it came during, for the agent."""

    def __init__(self, server: str, approvals: Approvals) -> None:
        self.server = server
        self.approvals = approvals

    async def answer(
        self, params: mcp_types.ElicitRequestParams, origin: CallOrigin | None
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """The person's answer to a request, or the error that refuses a form this client
        cannot show."""
        asker = f"MCP server {self.server!r}"
        session = origin.session if origin is not None else MAIN_SESSION
        call = origin.tool if origin is not None else ""
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            site = urlsplit(params.url).hostname or "an unknown site"
            outcome = await self.approvals.ask_input(
                session,
                asker=asker,
                call=call,
                message=params.message,
                url=f"{params.url} (on {site})",
            )
        else:
            try:
                form = ElicitationForm.from_schema(params.requested_schema)
            except UnsupportedForm as exc:
                reason = (
                    f"this client cannot show the form of MCP server {self.server!r} to a "
                    f"person: {exc}"
                )
                self._tell_agent(origin, params.message, f"it was refused, since {reason}")
                return mcp_types.ErrorData(code=mcp_types.INVALID_PARAMS, message=reason)
            outcome = await self.approvals.ask_input(
                session, asker=asker, call=call, message=params.message, form=form
            )
        self._tell_agent(origin, params.message, _outcome_words(outcome))
        if outcome.action == "accept":
            if isinstance(params, mcp_types.ElicitRequestURLParams):
                return mcp_types.ElicitResult(action="accept")
            return mcp_types.ElicitResult(action="accept", content=outcome.values)
        return mcp_types.ElicitResult.model_validate(
            {"action": "decline", "_meta": {"io.wakeful/reason": outcome.reason}}
        )

    def _tell_agent(self, origin: CallOrigin | None, message: str, ended: str) -> None:
        if origin is None:
            return
        line = " ".join(message.split())
        quoted = line if len(line) <= 200 else line[:199] + "…"
        origin.asked.append(
            f"During this call MCP server {self.server!r} asked the user for input "
            f"({quoted!r}): {ended}."
        )


def _outcome_words(outcome: InputOutcome) -> str:
    if outcome.action == "accept":
        return "the user answered, and the answer went to the server"
    return f"{outcome.reason}; the server was told it was declined"
