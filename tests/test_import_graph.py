"""The package's import graph: dependencies point one way, and there is no cycle.

Every module under src/wakeful is parsed with `ast` and every import counts: top-level ones,
those under `if TYPE_CHECKING:` and those inside functions. A type-only import is still a
dependency (the module cannot be read, type-checked or moved without the other), and a
function-level import is a cycle kept importable by postponing it, not a cycle removed.

Resolution rules: relative imports are resolved against the importing module's package;
`from pkg import name` is an edge to `pkg.name` when that is a module, and to `pkg` (its
`__init__`) otherwise. Importing `a.b.c` is not counted as importing the packages `a` and `a.b`:
every package's `__init__` runs on such an import, but a package's own modules importing each
other through it would make every package a cycle; what a package's `__init__` imports is
counted as that package's edges, like any module's. Imports made through `importlib` (the lazy
exports of `wakeful.discovery` and `wakeful.models`) are not seen here, but those packages name
the same modules under `TYPE_CHECKING`, which is.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "wakeful"

# What `wakeful.store.*` may import from the rest of the package: the records and interfaces
# of `wakeful.core`, and the leaf modules every layer shares.
STORE_MAY_IMPORT = (
    "wakeful.core",
    "wakeful.errors",
    "wakeful.events",
    "wakeful.messages",
    "wakeful.clock",
    "wakeful.storable_text",
)

# The public tool vocabulary that safety layers may use: what a tool is (`spec`), what it
# returns (`result`), and the process primitives a sandbox or a verification command runs on
# (`process`, `reaper`). The registry, the cache, background tasks, output shaping and the
# description lint are the tool machinery that safety wraps, never something it reaches into.
SAFETY_MAY_IMPORT_FROM_TOOLS = (
    "wakeful.tools",
    "wakeful.tools.spec",
    "wakeful.tools.result",
    "wakeful.tools.process",
    "wakeful.tools.reaper",
)

# Layers that sit above the tool vocabulary; `wakeful.tools.*` imports none of them.
TOOLS_MAY_NOT_IMPORT = (
    "wakeful.safety",
    "wakeful.mcp",
    "wakeful.toolkits",
    "wakeful.agent",
    "wakeful.runtime",
    "wakeful.cli",
)

# `wakeful.core` holds the records and interfaces every layer exchanges, so it depends on
# nothing but the leaf modules below, the standard library, pydantic and anyio (the one
# concurrency library, whose task groups an executor interface names). The tool result and
# spec are allowed because an executor interface is written in their terms; they are part of
# the vocabulary, not of the machinery (the cycle check keeps them from reaching back).
CORE_MAY_IMPORT = (
    "wakeful.core",
    "wakeful.errors",
    "wakeful.events",
    "wakeful.messages",
    "wakeful.tools.result",
    "wakeful.tools.spec",
)
CORE_MAY_IMPORT_EXTERNAL = frozenset({"anyio", "pydantic", "pydantic_core", "typing_extensions"})


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int


def within(module: str, prefixes: Iterable[str]) -> bool:
    """Whether `module` is one of `prefixes` or a submodule of one."""
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((SOURCE_ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SOURCE_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Each name `module` imports, resolved to an absolute dotted name, with its line."""
    is_package = path.name == "__init__.py"
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                keep = len(package_parts) - (node.level - 1)
                assert keep > 0, f"{module}:{node.lineno} imports above the top-level package"
                base = ".".join(package_parts[:keep])
                if node.module:
                    base = f"{base}.{node.module}"
            else:
                assert node.module is not None
                base = node.module
            for alias in node.names:
                yield (f"{base}.{alias.name}" if alias.name != "*" else base), node.lineno


def resolve(name: str) -> str | None:
    """The package module `name` refers to: itself, or the longest module prefix of it
    (`wakeful.tools.spec.ToolResult` is `wakeful.tools.spec`). None outside the package."""
    known = modules()
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


@cache
def graph() -> dict[str, tuple[Edge, ...]]:
    """Each module's edges to other package modules, all imports counted."""
    edges: dict[str, tuple[Edge, ...]] = {}
    for module, path in modules().items():
        found: dict[str, Edge] = {}
        for name, line in imports_of(module, path):
            target = resolve(name) if within(name, [PACKAGE]) else None
            if target is not None and target != module and target not in found:
                found[target] = Edge(module, target, line)
        edges[module] = tuple(found.values())
    return edges


@cache
def external_imports() -> dict[str, tuple[tuple[str, int], ...]]:
    """Each module's imports from outside the package: (top-level name, line)."""
    return {
        module: tuple(
            (name.split(".")[0], line)
            for name, line in imports_of(module, path)
            if not within(name, [PACKAGE])
        )
        for module, path in modules().items()
    }


def cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    edges = graph()
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowlink[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for edge in edges[module]:
            if edge.imported not in index:
                visit(edge.imported)
                lowlink[module] = min(lowlink[module], lowlink[edge.imported])
            elif edge.imported in on_stack:
                lowlink[module] = min(lowlink[module], index[edge.imported])
        if lowlink[module] == index[module]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges)))
    try:
        for module in sorted(edges):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(components)


def describe(edge: Edge) -> str:
    return f"{edge.importer} -> {edge.imported}  (line {edge.line})"


def forbidden(importers: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """The edges from `importers` to package modules outside `allowed`."""
    allowed = tuple(allowed)
    return [
        describe(edge)
        for importer in importers
        for edge in graph()[importer]
        if not within(edge.imported, allowed)
    ]


def package_modules(prefix: str) -> list[str]:
    return [module for module in modules() if within(module, [prefix])]


def test_the_graph_sees_every_kind_of_import() -> None:
    """A sanity check of the parser on the package itself: it finds modules, relative and
    absolute imports, and `from package import submodule` resolves to the submodule."""
    assert "wakeful.tools.spec" in modules()
    assert "wakeful.safety" in modules()
    assert resolve("wakeful.tools.spec.ToolSpec") == "wakeful.tools.spec"
    assert resolve("wakeful.errors") == "wakeful.errors"
    assert any(edge.imported == "wakeful.errors" for edge in graph()["wakeful.tools.spec"])


def test_no_import_cycles() -> None:
    found = cycles()
    if not found:
        return
    edges = graph()
    report = []
    for component in found:
        members = set(component)
        inside = [
            describe(edge)
            for module in component
            for edge in edges[module]
            if edge.imported in members
        ]
        report.append(
            f"cycle of {len(component)} modules: {', '.join(component)}\n    "
            + "\n    ".join(inside)
        )
    pytest.fail("Import cycles (every import counted):\n" + "\n".join(report))


def test_store_depends_only_on_core_and_leaf_modules() -> None:
    bad = forbidden(package_modules("wakeful.store"), (*STORE_MAY_IMPORT, "wakeful.store"))
    assert not bad, "wakeful.store imports outside core and the leaf modules:\n" + "\n".join(bad)


def test_safety_uses_only_the_public_tool_vocabulary() -> None:
    bad = [
        describe(edge)
        for importer in package_modules("wakeful.safety")
        for edge in graph()[importer]
        if within(edge.imported, ["wakeful.tools"])
        and edge.imported not in SAFETY_MAY_IMPORT_FROM_TOOLS
    ]
    assert not bad, "wakeful.safety reaches into the tool machinery:\n" + "\n".join(bad)


def test_tools_do_not_import_the_layers_above_them() -> None:
    bad = [
        describe(edge)
        for importer in package_modules("wakeful.tools")
        for edge in graph()[importer]
        if within(edge.imported, TOOLS_MAY_NOT_IMPORT)
    ]
    assert not bad, "wakeful.tools imports a layer above it:\n" + "\n".join(bad)


def test_config_imports_only_light_toolkit_and_mcp_modules() -> None:
    bad = [
        describe(edge)
        for edge in graph()["wakeful.config"]
        if (within(edge.imported, ["wakeful.toolkits"]) and not edge.imported.endswith(".settings"))
        or (within(edge.imported, ["wakeful.mcp"]) and edge.imported != "wakeful.mcp.config")
    ]
    assert not bad, "wakeful.config imports a server or MCP module:\n" + "\n".join(bad)


def test_importing_config_loads_no_server_module_nor_the_mcp_sdk() -> None:
    probe = "import json, sys\nimport wakeful.config\nprint(json.dumps(sorted(sys.modules)))\n"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(completed.stdout)
    # The toolkit packages themselves import nothing (their `__init__` says so); their
    # settings modules are what the configuration validates.
    packages = {name for name, path in modules().items() if path.name == "__init__.py"}
    servers = [
        name
        for name in loaded
        if within(name, ["wakeful.toolkits"])
        and name not in packages
        and not name.endswith(".settings")
    ]
    sdk = [name for name in loaded if within(name, ["mcp"])]
    assert not servers, f"importing wakeful.config loads toolkit modules: {servers}"
    assert not sdk, f"importing wakeful.config loads the MCP SDK: {sdk[:10]}"


def test_core_depends_only_on_the_standard_library_pydantic_and_leaf_modules() -> None:
    core = package_modules("wakeful.core")
    bad = forbidden(core, CORE_MAY_IMPORT)
    bad += [
        f"{module} -> {name}  (line {line})"
        for module in core
        for name, line in external_imports()[module]
        if name not in sys.stdlib_module_names and name not in CORE_MAY_IMPORT_EXTERNAL
    ]
    assert not bad, "wakeful.core imports beyond its allowed dependencies:\n" + "\n".join(bad)
