"""Agent definitions: what kinds of child agent a session may spawn.

From `[[agents]]` tables of wakeful.toml, or from folders like skills: `agents/<name>/AGENT.md`
with YAML front matter (the fields below) and the role prompt as its body::

    ---
    name: researcher
    description: Finds and summarises sources on one question.
    tools: [web_search, fetch_page]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    ---
    You research one question and report what the sources say, with links.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..collab.settings import ContextSettings
from ..discovery.skills import split_front_matter
from ..errors import ConfigError
from ..models.base import Model

__all__ = [
    "AgentDefinition",
    "agent_folders",
    "check_definitions",
]

_NAME: Final = re.compile(r"[a-z][a-z0-9_-]{0,39}")
AGENT_FILE: Final = "AGENT.md"


class AgentDefinition(BaseModel):
    """One kind of child agent."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    """How the parent names it in spawn_subagent, e.g. "researcher"."""

    description: str = Field(min_length=1, max_length=500)
    """When to use it: shown to the parent in spawn_subagent's description."""

    role: str = Field(min_length=1, max_length=20_000)
    """The child's role prompt: who it is and how it works."""

    boundaries: str = ""
    """What it must not do, and what it hands back or escalates instead of doing."""

    tools: tuple[str, ...] | None = None
    """The tools it may use, by name; None: the parent's tools (less those that reach the user,
    which a child never has)."""

    output_schema: dict[str, Any] | None = None
    """The JSON schema its result must match; None: any JSON value (e.g. a text)."""

    context: ContextSettings = ContextSettings()
    """What it reads besides the task (see :mod:`wakeful.collab`): the strategy (adaptive by
    default), its rules, and the private fields that never reach it. A call may choose another
    strategy and add private fields, never remove one."""

    max_seconds: float | None = Field(default=None, gt=0)
    """Its wall time; None: the runtime's limit."""

    max_tokens: int | None = Field(default=None, gt=0)
    """Its model tokens (input + output); None: the runtime's limit."""

    model: Model | None = Field(default=None, exclude=True)
    """Its own model; None: the parent's."""

    origin: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is not an agent name: use lower-case letters, digits, '-' and '_', "
                "starting with a letter, at most 40 characters (e.g. 'researcher')"
            )
        return value

    @field_validator("output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                jsonschema.Draft202012Validator.check_schema(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(
                    f"output_schema is not a valid JSON schema: {exc.message}"
                ) from exc
        return value


def check_definitions(definitions: Iterable[AgentDefinition]) -> dict[str, AgentDefinition]:
    """The definitions by name; ConfigError when two share a name (saying where each is)."""
    found: dict[str, AgentDefinition] = {}
    for definition in definitions:
        earlier = found.get(definition.name)
        if earlier is not None:
            raise ConfigError(
                f"Two agents are named {definition.name!r} ({earlier.origin or 'given'} and "
                f"{definition.origin or 'given'}); rename one."
            )
        found[definition.name] = definition
    return found


def agent_folders(roots: Sequence[Path]) -> list[AgentDefinition]:
    """The agents defined as `<root>/<name>/AGENT.md` folders; ConfigError naming the file and
    the field for one that is not valid (one bad definition fails the start, rather than an
    agent silently missing)."""
    definitions = []
    for root in roots:
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            path = folder / AGENT_FILE
            if path.is_file():
                definitions.append(_read(path, folder.name))
    return definitions


def _read(path: Path, folder_name: str) -> AgentDefinition:
    text = path.read_text(encoding="utf-8")
    split = split_front_matter(text)
    if split is None:
        raise ConfigError(
            f"{path} has no front matter: start it with a '---' line, the fields (name, "
            "description, tools, output_schema), a closing '---', then the role prompt."
        )
    header, body_line = split
    try:
        fields = yaml.safe_load(header) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: its front matter is not valid YAML ({exc}).") from exc
    if not isinstance(fields, dict):
        raise ConfigError(f"{path}: its front matter must be a mapping of fields.")
    fields.setdefault("name", folder_name)
    if fields["name"] != folder_name:
        raise ConfigError(
            f"{path}: name {fields['name']!r} differs from its folder {folder_name!r}; make them "
            "the same."
        )
    body = "\n".join(text.split("\n")[body_line - 1 :]).strip()
    fields["role"] = body
    fields["origin"] = str(path)
    if isinstance(fields.get("tools"), list):
        fields["tools"] = tuple(fields["tools"])
    try:
        return AgentDefinition.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'definition'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from exc
