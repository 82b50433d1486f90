"""The @tool decorator, argument validation and the registry."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from wakeful.errors import ToolError, UserError
from wakeful.tools.registry import ToolRegistry
from wakeful.tools.spec import ToolContext, ToolResult, ToolSpec, tool


@tool(examples=({"city": "Paris"},))
async def forecast(
    ctx: ToolContext,
    city: Annotated[str, Field(description="City name, e.g. 'Paris'")],
    days: Annotated[int, Field(ge=1, le=7, description="How many days, e.g. 3")] = 1,
) -> dict[str, Any]:
    """The forecast for a city."""
    return {"city": city, "days": days}


def test_the_schema_describes_parameters_and_hides_the_context() -> None:
    schema = forecast.spec.input_schema
    assert schema["properties"] == {
        "city": {"description": "City name, e.g. 'Paris'", "type": "string"},
        "days": {
            "default": 1,
            "description": "How many days, e.g. 3",
            "maximum": 7,
            "minimum": 1,
            "type": "integer",
        },
    }
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False
    assert forecast.takes_context
    assert forecast.spec.description == "The forecast for a city."
    assert forecast.spec.examples == ({"city": "Paris"},)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "field `city` is required"),
        ({"city": "Paris", "days": 9}, "field `days`: Input should be less than or equal to 7"),
        ({"city": "Paris", "day": 2}, "field `day` is not a parameter of this tool"),
        ({"city": ["Paris"]}, "field `city`: Input should be a valid string"),
    ],
)
def test_validation_failures_name_the_field(arguments: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ToolError) as info:
        forecast.validate(arguments)
    assert str(info.value).startswith("Invalid arguments for forecast: ")
    assert fragment in str(info.value)


def test_results_are_converted_for_the_model() -> None:
    class Point(BaseModel):
        x: int

    assert ToolResult.of("text") == ToolResult("text")
    assert ToolResult.of(None).content == "done"
    assert ToolResult.of({"a": "é"}).content == '{"a": "é"}'
    assert ToolResult.of(Point(x=1)).structured == {"x": 1}


def test_developer_mistakes_are_reported_clearly() -> None:
    with pytest.raises(UserError, match="must be an `async def`"):
        tool(lambda: None)  # type: ignore[arg-type]

    async def undocumented() -> None:
        pass

    with pytest.raises(UserError, match="has no description"):
        tool(undocumented)

    async def variadic(*args: int) -> None:
        """Doc."""

    with pytest.raises(UserError, match=r"\*args/\*\*kwargs cannot be described"):
        tool(variadic)

    with pytest.raises(UserError, match="Tool name 'bad name!' is invalid"):
        ToolSpec(name="bad name!", description="d", input_schema={})


def test_the_registry_refuses_duplicate_names() -> None:
    registry = ToolRegistry([forecast])
    with pytest.raises(UserError, match="already registered"):
        registry.add(forecast)
    registry.add(forecast, replace=True)
    assert registry.names == ["forecast"]
