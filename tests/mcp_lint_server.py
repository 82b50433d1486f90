"""A small third-party stdio MCP server for `wakeful tools lint -- python tests/mcp_lint_server.py`.

One tool follows the description standard, one misses most of it, and one has an Examples:
section whose example does not match its schema.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from pydantic import Field

server = MCPServer("lint-demo")


@server.tool(
    description=(
        "Look up the weather forecast of a city.\n\n"
        "Use it when the user asks about the weather in a place. It cannot forecast more than "
        "7 days ahead.\n"
        'Result: {"city": "Paris", "days": [{"date": "2025-06-02", "high_c": 24}]}.\n'
        "Cost: about 300 ms; under 1,000 characters.\n\n"
        "Examples:\n"
        '{"city": "Paris"}\n'
        '{"city": "Lyon", "days": 3}'
    )
)
def forecast(
    city: Annotated[str, Field(description="The city, e.g. 'Paris'.")],
    days: Annotated[int, Field(ge=1, le=7, description="How many days, e.g. 3.")] = 1,
) -> str:
    return f"{city}: sunny for {days} days"


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(
    description=(
        "Count the words of a text. Use it for long texts. It does not count numbers. "
        "Returns the count as an integer. Cost: instant; a few characters.\n\n"
        "Examples:\n"
        '{"body": "hello world"}'
    )
)
def count_words(text: Annotated[str, Field(description="The text, e.g. 'hello world'.")]) -> int:
    return len(text.split())


if __name__ == "__main__":
    server.run()
