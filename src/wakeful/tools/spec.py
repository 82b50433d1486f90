"""Tool specifications, and the decorator that makes a Python function a tool.

A tool is a name, a description written for the model, a JSON-schema input, annotations that say
how risky it is, and a run mode. Arguments are validated against the schema before the function
runs; a validation failure becomes a :class:`ToolError` that names each field at fault, so the
model can correct the call.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ..errors import ToolError, UserError
from ..models.base import ToolDefinition
from .result import ToolResult as ToolResult

if TYPE_CHECKING:
    from ..services import Services
    from .tasks import TaskHandle

RunMode = Literal["inline", "background"]
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """Hints about a tool's effects, after MCP's tool annotations."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: ToolAnnotations = ToolAnnotations()
    run_mode: RunMode = "inline"
    examples: tuple[dict[str, Any], ...] = ()
    root_paths: tuple[str, ...] = ()
    """Parameters that name a path the tool confines to its root: the safety gate refuses a
    call whose path leaves the root before it asks anyone (the tool would refuse it anyway)."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise UserError(
                f"Tool name {self.name!r} is invalid: use 1-64 letters, digits, '_', '.' or '-'."
            )

    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.input_schema)


@dataclass
class ToolContext:
    """What a running tool can reach: its session, its call, and the runtime's services."""

    session: str
    call_id: str
    tool_name: str
    services: Services
    task: TaskHandle | None = None
    # True when a person or the reviewer model approved this exact call before it ran; a tool
    # whose own checks would otherwise ask for approval (e.g. a shell command) may then proceed.
    approved: bool = False

    async def progress(self, percent: float | None, message: str = "") -> None:
        """Report progress; it is shown by `task_status` and may arrive as a tool.progress event."""
        if self.task is not None:
            await self.task.report_progress(percent, message)


ToolFunction = Callable[..., Awaitable[Any]]


@dataclass
class Tool:
    """A tool the runtime can call: a spec and the code behind it."""

    spec: ToolSpec
    function: ToolFunction
    arguments_model: type[BaseModel] | None = None
    takes_context: bool = False
    _validator: Callable[[dict[str, Any]], dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check arguments against the input schema; raise ToolError naming each bad field."""
        if self.arguments_model is not None:
            try:
                parsed = self.arguments_model.model_validate(arguments)
            except ValidationError as exc:
                raise ToolError(describe_validation_error(self.name, exc)) from exc
            return {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self._validator is not None:
            return self._validator(arguments)
        return arguments

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Validate, then run. Errors the tool raises are the caller's to map (see execute)."""
        values = self.validate(arguments)
        if self.takes_context:
            result = await self.function(ctx, **values)
        else:
            result = await self.function(**values)
        return ToolResult.of(result)


def describe_validation_error(tool_name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        if err["type"] == "missing":
            parts.append(f"field `{where}` is required")
        elif err["type"] == "extra_forbidden":
            parts.append(f"field `{where}` is not a parameter of this tool")
        else:
            parts.append(f"field `{where}`: {err['msg']} (got {err.get('input')!r})")
    return f"Invalid arguments for {tool_name}: " + "; ".join(parts) + ". Fix them and call again."


class _StrictArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)


def _build_arguments_model(fn: Callable[..., Any], tool_name: str) -> tuple[type[BaseModel], bool]:
    signature = inspect.signature(fn)
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    takes_context = False
    for index, (pname, param) in enumerate(signature.parameters.items()):
        annotation = hints.get(pname, Any)
        if index == 0 and (pname == "ctx" or annotation is ToolContext):
            takes_context = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(
                f"Tool {tool_name!r}: *args/**kwargs cannot be described to a model; "
                "declare each parameter."
            )
        # A default that is a pydantic `Field(...)` carries the description and constraints.
        default = param.default if param.default is not inspect.Parameter.empty else ...
        fields[pname] = (annotation, default)
    model = create_model(f"{tool_name}_arguments", __base__=_StrictArgs, **fields)
    return model, takes_context


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    props = schema.get("properties")
    if isinstance(props, dict):
        schema["properties"] = {
            k: {kk: vv for kk, vv in v.items() if kk != "title"} for k, v in props.items()
        }
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations = ToolAnnotations(),
    run_mode: RunMode = "inline",
    examples: tuple[dict[str, Any], ...] = (),
    root_paths: tuple[str, ...] = (),
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    annotations: ToolAnnotations = ToolAnnotations(),
    run_mode: RunMode = "inline",
    examples: tuple[dict[str, Any], ...] = (),
    root_paths: tuple[str, ...] = (),
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make an async function a :class:`Tool`.

    The description defaults to the docstring; parameters are described with
    `Annotated[str, Field(description="…, e.g. 'ls -l'")]`. A first parameter named `ctx` (or
    typed `ToolContext`) receives the call's context and is not shown to the model.
    """

    def wrap(func: ToolFunction) -> Tool:
        if not inspect.iscoroutinefunction(func):
            raise UserError(f"Tool {func.__name__!r} must be an `async def` function.")
        tool_name = name or func.__name__
        text = description or inspect.cleandoc(func.__doc__ or "")
        if not text:
            raise UserError(
                f"Tool {tool_name!r} has no description: add a docstring that says when to use "
                "it, what it returns and what it cannot do."
            )
        model, takes_context = _build_arguments_model(func, tool_name)
        spec = ToolSpec(
            name=tool_name,
            description=text,
            input_schema=_clean_schema(model.model_json_schema()),
            annotations=annotations,
            run_mode=run_mode,
            examples=examples,
            root_paths=root_paths,
        )
        return Tool(spec=spec, function=func, arguments_model=model, takes_context=takes_context)

    if fn is not None:
        return wrap(fn)
    return wrap
