"""Prefix stability with active tool discovery: over a 50-turn scripted session, the share of
model requests whose prefix (system prompt + tool definitions) is byte-identical to the first's.

The session runs over 125 tools of 16 real MCP servers' catalogs (LiveMCPBench), served in
process. Every fifth turn the scripted model discovers a capability it lacks and then calls the
tool it found; the other turns call loaded or core tools. Two ways of loading are compared on the
same trajectory:

- wakeful: definitions arrive as discover_tools results at the end of the trajectory; the tool
  list sent to the provider (core tools + discover_tools + call_tool) never changes.
- appending to the tool list: each loaded tool's definition is added to the request's tools
  (what a framework does when it "registers" a discovered tool); computed from the same run.

    .venv/bin/python bench/prefix_stability.py [--turns 50]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio

from report import Table, header

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "discovery"))
from catalog_servers import catalog_servers

from wakeful.agent.session import SessionConfig
from wakeful.discovery.session_tools import DiscoverySettings
from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ModelRequest, ToolDefinition
from wakeful.runtime import Runtime

NEEDS = [
    "get the current stock price of a company",
    "search the web with Bing",
    "find a cooking recipe",
    "trending topics on social media",
    "read the text of a PDF file",
    "look up a place on a map",
    "extract images from a web page",
    "search biomedical articles",
    "look up npm package security",
    "League of Legends champion statistics",
]


def scripted(turns: int) -> FunctionModel:
    def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        done = sum(1 for m in messages if isinstance(m, ToolMessage))
        if done >= turns - 1:
            return say("")
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "discover_tools":
            answer = json.loads(last.content)
            if answer["loaded"]:
                first = answer["loaded"][0]
                return use(call("call_tool", name=first["name"], arguments={}))
        if done % 5 == 0:
            return use(call("discover_tools", need=NEEDS[(done // 5) % len(NEEDS)]))
        return use(call("list_tasks"))

    return FunctionModel(play)


def prefix(request: ModelRequest, extra: Sequence[ToolDefinition] = ()) -> str:
    tools = [(t.name, t.description, t.parameters) for t in [*request.tools, *extra]]
    return json.dumps([request.messages[0].model_dump(), tools], sort_keys=True)


def appended_tools(request: ModelRequest) -> list[ToolDefinition]:
    """The definitions loaded so far, as a framework appending them to the tool list would."""
    loaded: list[ToolDefinition] = []
    for message in request.messages:
        if isinstance(message, ToolMessage) and message.name == "discover_tools":
            for entry in json.loads(message.content).get("loaded", []):
                loaded.append(
                    ToolDefinition(entry["name"], entry["description"], entry["parameters"])
                )
    return loaded


async def run(turns: int) -> tuple[list[ModelRequest], int]:
    model = scripted(turns)
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(
            model=model,
            with_timers=False,
            workdir=Path(tmp),
            discovery=DiscoverySettings(),
            mcp_in_process=catalog_servers(),
            session_config=SessionConfig(max_model_requests_per_activation=turns + 5),
        )
        async with runtime:
            await runtime.submit(user_input("Work through my list of errands."))
            await runtime.wait_idle()
            tools = len(runtime.registry)
    return model.requests, tools


def share(prefixes: list[str]) -> tuple[int, float]:
    same = sum(1 for p in prefixes if p == prefixes[0])
    return same, same / len(prefixes)


async def main(turns: int) -> None:
    requests, tools = await run(turns)
    header(f"Prefix stability: a {len(requests)}-request scripted session over {tools} tools")
    ours = [prefix(r) for r in requests]
    appended = [prefix(r, appended_tools(r)) for r in requests]
    loads = sum(
        1
        for r in requests[-1:]
        for m in r.messages
        if isinstance(m, ToolMessage) and m.name == "discover_tools"
    )
    table = Table(["loading", "requests", "identical prefixes", "share"])
    for name, prefixes in (
        ("wakeful (results at the end)", ours),
        ("appended to tool list", appended),
    ):
        same, fraction = share(prefixes)
        table.add(name, len(prefixes), same, f"{fraction:.0%}")
    table.print()
    print(f"\n{loads} discover_tools calls in the session.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="the same 50 turns (it is quick)")
    args = parser.parse_args()
    anyio.run(main, args.turns)
