"""Active tool discovery in a session: `discover_tools`, `call_tool`, and what stays in the prompt.

With discovery on, a session's prompt holds a few core tools plus `discover_tools` and
`call_tool`; every other tool of the runtime (its own and those of its MCP servers) is *deferred*:
callable, indexed (:class:`~wakeful.discovery.index.ToolIndex`), but not described to the model
until it asks. `discover_tools(need)` answers with the full definitions of the best matches; that
answer is an ordinary tool result, so the definitions are appended once, at the end of the
trajectory, and stay where they were first appended. From the next request on the model calls
them with `call_tool(name, arguments)` — the tool list sent to the provider never changes, so the
system prompt and tool definitions are a byte-identical prefix on every request and the
provider's prompt cache keeps hitting — or by their own name where a provider allows it.
Rediscovering a loaded tool says so instead of appending its definition again, and the status
block lists the tools loaded so far.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ToolError
from ..messages import Message, ToolMessage
from ..models.base import ToolDefinition
from ..tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .catalog import Catalog, CatalogServer, CatalogTool

if TYPE_CHECKING:
    from .index import Embedded, ToolIndex

LOCAL_SERVER = "local"
"""The catalog server of tools given to the runtime in code (not from an MCP server)."""

DISCOVER_TOOLS = "discover_tools"

# The chapter's hierarchy, plus "act" for tools that change things: (group, what it holds,
# words that put a tool in it). The first group whose words appear in a tool's name wins; then
# its description is tried the same way.
_GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("search", "look for information", ("search", "find", "lookup", "discover", "grep")),
    (
        "parse",
        "turn unstructured data into text or fields",
        ("ocr", "parse", "transcribe", "extract", "convert", "analy", "summar", "recogn"),
    ),
    (
        "query",
        "structured data sources and public APIs",
        ("weather", "stock", "quote", "price", "exchange", "rate", "forecast", "sql", "database"),
    ),
    (
        "read",
        "content from a known place",
        ("read", "get", "fetch", "list", "open", "download", "view", "show", "load", "page"),
    ),
    (
        "act",
        "change things: write, send, create, run",
        ("write", "edit", "create", "send", "delete", "update", "run", "exec", "post", "set"),
    ),
)
_WORD = re.compile(r"[a-z]+")
_EXAMPLES_PER_GROUP = 6
_CLOSEST = 3  # weak candidates named when nothing matches


class DiscoverySettings(BaseModel):
    """`[discovery]` in wakeful.toml: which tools stay in the prompt, and how to search."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    core: list[str] = Field(
        default_factory=list,
        description="Tool names kept in the prompt besides the core tools, e.g. 'web_search'.",
    )
    k: int = Field(default=5, ge=1, le=20, description="Tools discover_tools returns by default.")
    embeddings_model: str | None = Field(
        default=None,
        description="A sentence-transformers model folder (e.g. all-MiniLM-L6-v2) for the hybrid "
        "ranking: the model (through ONNX Runtime) reads needs of up to 48 tokens, its static "
        "token embeddings every need, both fused with BM25. Derived once (about two minutes), "
        "then cached. Needs `pip install wakeful[embeddings]`.",
    )


@dataclass
class Discovery:
    """The runtime's deferred tools: the catalog, its index, and what each session loaded."""

    index: ToolIndex
    core_names: tuple[str, ...]
    loaded: dict[str, list[str]] = field(default_factory=dict)
    k: int = 5

    @property
    def catalog(self) -> Catalog:
        return self.index.catalog()

    def loaded_for(self, session: str) -> list[str]:
        return self.loaded.setdefault(session, [])

    def update(self, servers: Iterable[CatalogServer]) -> None:
        """Make the index hold exactly these servers, re-indexing only those that changed.

        Catalog tools are named as the runtime's registry names them (see `catalog_entry`), so
        a match's tool is the name to call."""
        self.apply(*self.changes(servers))

    def changes(self, servers: Iterable[CatalogServer]) -> tuple[list[str], list[CatalogServer]]:
        """What :meth:`update` would do: the servers to remove, and those new or changed."""
        wanted = {server.name: server for server in servers}
        held = self.catalog.servers
        removed = [name for name in held if name not in wanted]
        changed = [server for name, server in wanted.items() if held.get(name) != server]
        return removed, changed

    def apply(
        self,
        removed: Sequence[str],
        changed: Sequence[CatalogServer],
        embedded: Embedded | None = None,
    ) -> None:
        """Carry out :meth:`changes`, with any vectors embedded beforehand (see
        `ToolIndex.embed_texts`)."""
        for name in removed:
            self.index.remove_server(name)
        if changed:
            self.index.upsert_servers(changed, embedded=embedded)

    def restore(self, session: str, messages: Sequence[Message]) -> None:
        """Rebuild what a session had loaded from its trajectory (after a restart)."""
        loaded = self.loaded_for(session)
        for message in messages:
            if not isinstance(message, ToolMessage) or message.name != DISCOVER_TOOLS:
                continue
            try:
                answer = json.loads(message.content)
            except json.JSONDecodeError:
                continue
            for entry in answer.get("loaded", []) if isinstance(answer, dict) else []:
                name = entry.get("name") if isinstance(entry, dict) else None
                if isinstance(name, str) and name not in loaded:
                    loaded.append(name)

    def hint(self) -> str:
        """The tool hierarchy for the system prompt: groups, their size and a few names."""
        groups: dict[str, list[str]] = {name: [] for name, _, _ in _GROUPS}
        for entry in self.catalog.tools():
            groups[_group_of(entry)].append(entry.name)
        total = sum(len(names) for names in groups.values())
        if total == 0:
            return ""
        lines = [
            f"Besides the tools above, {total} more tools are available through discover_tools "
            f"({len(self.catalog.servers)} servers). They fall into these groups:"
        ]
        for name, what, _ in _GROUPS:
            names = sorted(set(groups[name]))
            if not names:
                continue
            shown = ", ".join(names[:_EXAMPLES_PER_GROUP])
            more = f", … ({len(names)} in all)" if len(names) > _EXAMPLES_PER_GROUP else ""
            lines.append(f"- {name} ({what}): {shown}{more}")
        lines.append(
            "When you need a capability you do not have, call discover_tools with the need in "
            "plain words; then call a tool it loaded with call_tool(name, arguments)."
        )
        return "\n".join(lines)

    def core_definitions(self, registry_tools: Iterable[Tool]) -> list[ToolDefinition]:
        """The tools described in every request: the core ones, in registry order."""
        core = set(self.core_names)
        return [t.spec.definition() for t in registry_tools if t.name in core]


def _group_of(tool: CatalogTool) -> str:
    for text in (tool.name.lower(), tool.description.lower()):
        words = text.replace("_", " ").replace("-", " ").replace(".", " ")
        for name, _, markers in _GROUPS:
            if any(marker in words for marker in markers):
                return name
    return "read"


def catalog_entry(server: str, description: str, tools: Sequence[Tool]) -> CatalogServer:
    """A catalog server for tools of the runtime, with each tool's registry name as its name."""
    return CatalogServer(
        name=server,
        description=description,
        tools=tuple(
            CatalogTool(
                server=server,
                name=t.name,
                description=t.spec.description,
                input_schema=t.spec.input_schema,
            )
            for t in tools
        ),
    )


def discovery_of(ctx: ToolContext) -> Discovery:
    found = ctx.services.state.get(Discovery)
    if not isinstance(found, Discovery):
        raise ToolError(
            f"{ctx.tool_name} needs tool discovery, which this runtime does not have: start it "
            "with Runtime(discovery=DiscoverySettings()) or [discovery] in wakeful.toml."
        )
    return found


@tool(
    # Not read-only: it changes what the session has loaded, so its answers must never come
    # from the result cache (a repeat must say "already loaded").
    annotations=ToolAnnotations(read_only=False, idempotent=False),
    examples=(
        {"need": "current stock price of a company"},
        {"need": "extract the text of a scanned PDF page", "k": 3},
        {"need": "查询明天的天气"},
    ),
)
async def discover_tools(
    ctx: ToolContext,
    need: Annotated[
        str,
        Field(
            min_length=2,
            max_length=500,
            description="The capability you need, in plain words (any language), e.g. "
            "'convert a currency amount at today's rate'.",
        ),
    ],
    k: Annotated[
        int | None,
        Field(ge=1, le=20, description="How many tools to load at most (default 5), e.g. 3."),
    ] = None,
) -> ToolResult:
    """Find tools for a capability you lack and load them, so you can call them next.

    Use it when none of your tools fits the task: describe the need, not a tool name. It
    searches every tool this runtime can reach (its MCP servers included), first by server,
    then by tool. It cannot run anything and does not guess: when nothing matches well it
    answers "no tool found" with advice instead (rephrase, use a general tool such as
    code_interpreter or run_shell, or ask the user).

    Result: JSON {"found", "loaded": [{"name", "server", "description", "parameters"}],
    "already_loaded": [names], "advice"}; when found is false, also
    "closest_weak_candidates" (names only, not loaded: none matched well). Each loaded tool's
    full definition comes once; call it with call_tool(name=..., arguments={...}) from your
    next step. Tools loaded earlier are listed under already_loaded without their definitions
    (they are above in the conversation).

    Cost: a few milliseconds; about 150-400 tokens per tool loaded.
    """
    from .index import NOT_FOUND_ADVICE  # with the index, which the runtime built already

    discovery = discovery_of(ctx)
    wanted = k or discovery.k
    # One ranking serves both answers: the confident matches, or the closest weak candidates.
    ranked, threshold = discovery.index.rank_judged(need, max(wanted, _CLOSEST))
    matches = [m for m in ranked[:wanted] if m.score >= threshold]
    if not matches:
        # Nothing reached the calibrated score: no match is claimed and nothing is loaded; the
        # closest names are listed as what they are, weak candidates, so a rephrased need can
        # aim better.
        answer = {
            "found": False,
            "loaded": [],
            "already_loaded": [],
            "closest_weak_candidates": [m.tool for m in ranked[:_CLOSEST]],
            "advice": NOT_FOUND_ADVICE,
        }
        return ToolResult(json.dumps(answer, ensure_ascii=False), structured=answer)
    loaded = discovery.loaded_for(ctx.session)
    fresh: list[dict[str, Any]] = []
    again: list[str] = []
    for match in matches:
        name = match.tool
        if name in loaded or name in again:
            if name not in again:
                again.append(name)
            continue
        definition = discovery.catalog.tool(match.server, match.tool)
        if definition is None:
            continue
        loaded.append(name)
        fresh.append(
            {
                "name": name,
                "server": match.server,
                "description": definition.description,
                "parameters": dict(definition.input_schema),
            }
        )
    answer = {
        "found": True,
        "loaded": fresh,
        "already_loaded": again,
        "advice": "Call a loaded tool with call_tool(name=<name>, arguments={...}).",
    }
    return ToolResult(json.dumps(answer, ensure_ascii=False), structured=answer)


@tool(
    examples=(
        {"name": "get_stock_quote", "arguments": {"symbol": "AAPL"}},
        {"name": "wikipedia.search", "arguments": {"query": "Ada Lovelace"}},
    ),
)
async def call_tool(
    ctx: ToolContext,
    name: Annotated[
        str,
        Field(
            min_length=1,
            max_length=128,
            description="The name of a tool discover_tools loaded, e.g. 'get_stock_quote'.",
        ),
    ],
    arguments: Annotated[
        dict[str, Any],
        Field(description="Its arguments, as its parameters say, e.g. {'symbol': 'AAPL'}."),
    ],
) -> ToolResult:
    """Call a tool that discover_tools loaded, by its name, with its arguments.

    Use it for every tool that is not in your tool list but whose definition discover_tools
    gave you. It cannot call a tool that was never loaded: discover it first. The tool's own
    checks, safety rules and run mode apply exactly as if it had been called directly.

    Result: the called tool's own result, as if it had been called directly.

    Cost: about a millisecond on top of the called tool's own latency; the result is the
    called tool's (usually a few hundred to a few thousand characters).
    """
    # The tool pipeline unwraps call_tool before any layer (wakeful.tools.pipeline), so the inner
    # call passes the same safety layers; reaching this body means it ran outside a pipeline,
    # or the call named call_tool itself (which the pipeline leaves as it is).
    if name == "call_tool":
        raise ToolError(
            "call_tool cannot call itself: give the name of the tool discover_tools found, e.g. "
            "call_tool(name='get_weather', arguments={'city': 'Paris'})."
        )
    raise ToolError(
        f"call_tool({name!r}) can only run inside an agent session with discovery on; call "
        f"{name} directly here."
    )


DISCOVERY_TOOLS: tuple[Tool, ...] = (discover_tools, call_tool)
"""The two tools every session with discovery has in its prompt."""
