"""Every built-in tool, called with arguments drawn from its own input schema: none may crash.

The tools come from their registries (the runtime's core tools, the perception and execution
servers' lists, discovery's and skills' tools), so a new tool is covered without touching this
file. Each gets schema-valid arguments of two kinds (see `schema_arguments`): a few drawn by
Hypothesis from its input schema, and its first example with one argument at a time moved to an
edge of its kind (empty, NUL, non-ASCII, the first and last representable times, number bounds).
Every call is made two ways: as an agent session makes it, in a running `Runtime` whose safety
gate approves what it would ask a person about, and through the MCP bridge from an in-memory
client whose user approves the same way. A call may succeed or fail as a tool error; it may not
raise past the tool (the registry's "failed with <exception>" result), log an error, show a
traceback through wakeful's code, end in a protocol error, or hang.

The world is a temporary workspace with a few files of each kind the tools read (and those the
tools' examples name); every network
service the tools know is pointed at a closed port on 127.0.0.1, and a fence refuses any
connection or name lookup beyond the loopback, so nothing leaves the machine whatever a drawn
URL says. Commands run in the sandbox, as they do for the agent.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import re
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import anyio
import mcp_types as types
import pytest
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import Field
from schema_arguments import boundary_arguments, draw_arguments

from mcp import Client
from wakeful.config import SafetyConfig, build_gate
from wakeful.discovery.session_tools import DISCOVERY_TOOLS, DiscoverySettings
from wakeful.discovery.skill_tools import SKILL_TOOLS, SkillsSettings
from wakeful.events import user_input
from wakeful.mcp.bridge import build_server
from wakeful.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from wakeful.models import FunctionModel, Turn, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime, core_tools
from wakeful.runtime.catalog import channel_tools
from wakeful.safety.approvals import ApprovalRequest, Approvals
from wakeful.safety.commands import PolicySettings
from wakeful.safety.gate import CallGate
from wakeful.safety.verdict import Verdict
from wakeful.services import Outbox
from wakeful.subagents.tools import CHILD_TOOLS, PARENT_TOOLS
from wakeful.toolkits.collaboration.server import wait_subagent
from wakeful.toolkits.collaboration.settings import CollaborationSettings
from wakeful.toolkits.collaboration.tools import COLLABORATION_TOOLS
from wakeful.toolkits.execution.server import EXECUTION_TOOLS
from wakeful.toolkits.execution.settings import (
    CalendarWriteSettings,
    EmailSettings,
    GitHubSettings,
    WebhookSettings,
)
from wakeful.toolkits.mail.settings import MailSettings
from wakeful.toolkits.perception.calendar import CalendarSettings, CalendarSource
from wakeful.toolkits.perception.public_http import PublicDataSettings
from wakeful.toolkits.perception.server import PERCEPTION_TOOLS
from wakeful.toolkits.perception.web_settings import WebSettings
from wakeful.tools.spec import Tool, tool

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

EXAMPLES_PER_TOOL = 8
"""Distinct argument sets drawn for each tool (fewer where its schema allows fewer)."""

CALL_SECONDS = 60.0
"""Longer than any call here should take: past it, the call counts as a hang."""

FIXTURES = Path(__file__).parent / "data_fixtures"

MAIL_PASSWORD_ENV = "WAKEFUL_EVERY_TOOL_IMAP_PASSWORD"
"""The mail tools' password variable: set, so their calls get as far as the (closed) port."""


def agent_tools() -> list[Tool]:
    """What an agent session offers besides the execution tools: core, perception, discovery,
    skills, collaboration and subagents (the execution server's task tools share names with
    the core ones)."""
    return [
        *core_tools(),
        *channel_tools(),
        *PERCEPTION_TOOLS,
        *DISCOVERY_TOOLS,
        *SKILL_TOOLS,
        *COLLABORATION_TOOLS,
        *PARENT_TOOLS,
        *CHILD_TOOLS,
        wait_subagent,
    ]


def tool_families() -> dict[str, list[Tool]]:
    """Each family of built-in tools, from the registry that assembles it."""
    core = core_tools()

    def from_package(package: str) -> list[Tool]:
        return [t for t in core if t.function.__module__.startswith(f"wakeful.toolkits.{package}")]

    return {
        "core": core,
        "triggers": from_package("triggers") + channel_tools(),
        "comms": from_package("comms"),
        "tasks": from_package("tasks"),
        "perception": list(PERCEPTION_TOOLS),
        "execution": list(EXECUTION_TOOLS),
        "discovery": list(DISCOVERY_TOOLS),
        "skills": list(SKILL_TOOLS),
        "collaboration": list(COLLABORATION_TOOLS),
        "subagents": [*PARENT_TOOLS, *CHILD_TOOLS, wait_subagent],
    }


def test_every_tool_family_is_found_and_covered() -> None:
    families = tool_families()
    empty = [name for name, tools in families.items() if not tools]
    assert not empty, f"No tools found for the families {empty}: did a registry move?"
    covered = {t.name for t in agent_tools()} | {t.name for t in EXECUTION_TOOLS}
    for name, tools in families.items():
        assert {t.name for t in tools} <= covered, name


# --- the world the tools see -------------------------------------------------------------------


@dataclass
class World:
    """A workspace with files to read, settings that keep every call on this machine, and the
    strings drawn arguments may use: the workspace's file names, and others the world knows (a
    skill, a calendar, a cell, a URL on the closed port)."""

    root: Path
    state: Path
    closed_port: int
    settings: list[object]
    files: list[str]
    known_strings: list[str]

    def gate(self) -> CallGate:
        safety = SafetyConfig(commands=PolicySettings(workspace=self.root))
        gate = build_gate(safety)
        assert gate is not None
        return gate


@functools.cache
def closed_loopback_port() -> int:
    """A port on 127.0.0.1 nothing listens on: connecting is refused at once. One for the whole
    run, so every test's world draws the same arguments (see `drawn_calls`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def make_world(tmp_path: Path) -> World:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n\nRotate the API keys every month.\n")
    (root / "data.csv").write_text("name,amount\nana,3\nbo,4\n")
    (root / "empty.pdf").write_bytes(b"")
    shutil.copy(FIXTURES / "calendar_personal.ics", root / "team.ics")
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet["A1"], sheet["A2"], sheet["A3"] = 1, 2, "=SUM(A1:A2)"
    book.save(root / "book.xlsx")
    skills = tmp_path / "skills"
    (skills / "demo").mkdir(parents=True)
    (skills / "demo" / "SKILL.md").write_text(
        "---\nname: demo\ndescription: A skill for tests.\n---\n\nSay hello.\n"
    )
    port = closed_loopback_port()
    closed = f"http://127.0.0.1:{port}"
    settings: list[object] = [
        *SafetyConfig(commands=PolicySettings(workspace=root)).settings(),
        WebSettings(search_backend="searxng", searxng_url=closed, brave_base_url=closed),
        PublicDataSettings(
            open_meteo_forecast_url=f"{closed}/v1/forecast",
            open_meteo_geocoding_url=f"{closed}/v1/search",
            wikipedia_api_url=f"{closed}/{{language}}/w/api.php",
            wikipedia_article_url=f"{closed}/{{language}}/wiki/{{title}}",
            arxiv_api_url=f"{closed}/api/query",
            exchange_rate_url=closed,
            stock_quote_url=f"{closed}/q/l/",
            timeout_seconds=5,
        ),
        CalendarSettings(sources={"work": CalendarSource(url=f"{closed}/work.ics")}),
        EmailSettings(
            host="127.0.0.1",
            port=port,
            security="none",
            from_address="Agent <agent@example.com>",
            timeout_seconds=5,
        ),
        MailSettings(
            host="127.0.0.1",
            port=port,
            security="none",
            username="agent",
            password_env=MAIL_PASSWORD_ENV,
            from_address="Agent <agent@example.com>",
            timeout_seconds=5,
        ),
        WebhookSettings(allowed_hosts=("127.0.0.1",), timeout_seconds=5),
        GitHubSettings(base_url=closed, timeout_seconds=5),
        CalendarWriteSettings(caldav_url=f"{closed}/dav/", timeout_seconds=5),
        SkillsSettings(roots=(("test", skills),)),
        # A request to a person waits at most a second here: no answer comes.
        CollaborationSettings(
            im_addresses=("boss@example.com",),
            email_addresses=("boss@example.com",),
            max_timeout_seconds=1,
        ),
    ]
    seed_example_files(root, [*agent_tools(), *EXECUTION_TOOLS])
    files = sorted(path.name for path in root.iterdir())
    known = [
        *(".", "*.md", "demo", "work", "A1", "B2", "Sheet", "=SUM(A1:A3)", "echo hello"),
        *("print(1 + 1)", "read_file", "2026-01-31", "2026-01-31T09:00:00+00:00"),
        *("Europe/Paris", "ana@example.com", f"{closed}/hook", "AAPL", "EUR", "rotate keys"),
        # Values at the edges of their kind, where crashes hide.
        *("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "zoë@example.com"),
    ]
    return World(root, tmp_path / "state", port, settings, files, known)


_PLAIN_PATH = re.compile(r"[\w.-]+(/[\w.-]+)*")


def seed_example_files(root: Path, tools: Sequence[Tool]) -> None:
    """Create the files the tools' own examples name (a relative path with an extension the
    world has a sample of), so that a call built from an example reaches the tool's work."""
    samples: dict[str, Callable[[Path], None]] = {
        ".ics": lambda path: shutil.copy(FIXTURES / "calendar_personal.ics", path),
        ".xlsx": lambda path: shutil.copy(root / "book.xlsx", path),
        ".csv": lambda path: path.write_text("name,amount\nana,3\n"),
        ".pdf": lambda path: path.write_bytes(b""),
    }
    for suffix in (".md", ".txt", ".py", ".toml", ".json", ".log", ".html"):
        samples[suffix] = lambda path: path.write_text("# sample\nprint('hello')\n")
    for value in strings_in([each.spec.examples for each in tools]):
        relative = Path(value)
        sample = samples.get(relative.suffix)
        if sample is None or not _PLAIN_PATH.fullmatch(value) or ".." in relative.parts:
            continue
        target = root / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            sample(target)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv(MAIL_PASSWORD_ENV, "not a real password")
    return make_world(tmp_path)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse name lookups and connections beyond 127.0.0.1, as a machine offline would."""
    lookup = socket.getaddrinfo
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex

    def is_local(host: object) -> bool:
        if host is None or host in ("localhost", b"localhost"):
            return True
        text = host.decode() if isinstance(host, bytes) else str(host)
        try:
            return ipaddress.ip_address(text.split("%")[0]).is_loopback
        except ValueError:
            return False

    def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_local(host):
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: no network in this test")
        return lookup(host, *args, **kwargs)

    def refuse_remote(address: Any) -> None:
        if isinstance(address, tuple) and not is_local(address[0]):
            raise ConnectionRefusedError(f"{address[0]}: no network in this test")

    def guarded_connect(self: socket.socket, address: Any) -> None:
        refuse_remote(address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        refuse_remote(address)
        return connect_ex(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)


# --- judging a call ------------------------------------------------------------------------------


_WAKEFUL_FRAME = re.compile(r'File "[^"<>]*[/\\]wakeful[/\\][^"]*\.py", line \d+')


@dataclass
class Findings:
    """What went wrong across all calls, reported together at the end."""

    calls: int = 0
    tools: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    succeeded: dict[str, int] = field(default_factory=dict)

    def judge(self, tool: str, arguments: dict[str, Any], text: str, *, is_error: bool) -> None:
        self.calls += 1
        self.tools.add(tool)
        self.succeeded[tool] = self.succeeded.get(tool, 0) + (not is_error)
        crashed = re.match(rf"Tool {re.escape(tool)} failed with \w+", text) is not None
        # A traceback of the agent's own code (code_interpreter shows those) is a result; one
        # through wakeful's modules is a crash that leaked into the text.
        leaked = _WAKEFUL_FRAME.search(text) is not None
        if crashed or leaked or "internal error" in text.lower():
            self.problems.append(f"{tool}({arguments!r}) crashed: {text[:600]}")
        elif is_error and not text.strip():
            self.problems.append(f"{tool}({arguments!r}) failed without saying why.")

    def report(self, where: str, seconds: float) -> None:
        """One line for the test's output (`pytest -s`): what ran, and which tools never got
        past their argument checks (a hint for a richer world, not a failure)."""
        never = sorted(tool for tool, count in self.succeeded.items() if count == 0)
        print(
            f"\n{where}: {self.calls} calls of {len(self.tools)} tools in {seconds:.1f} s; "
            f"never succeeded: {', '.join(never) or 'none'}"
        )

    def broke(self, tool: str, arguments: dict[str, Any], what: str) -> None:
        self.calls += 1
        self.tools.add(tool)
        self.problems.append(f"{tool}({arguments!r}) {what}")

    def check(self, expected_tools: Sequence[str], caplog: pytest.LogCaptureFixture) -> None:
        logged = [
            f"{r.name}: {r.getMessage()}"
            + (
                f" ({r.exc_info[0].__name__}: {r.exc_info[1]})"
                if r.exc_info and r.exc_info[1]
                else ""
            )
            for r in caplog.records
            if r.levelno >= logging.ERROR and r.name.startswith(("wakeful", "mcp"))
        ]
        problems = self.problems + [f"logged an error: {line}" for line in logged]
        assert not problems, f"{len(problems)} problems in {self.calls} calls:\n" + "\n".join(
            problems
        )
        assert set(expected_tools) <= self.tools, set(expected_tools) - self.tools


Plan = dict[str, list[dict[str, Any]]]
"""The calls to make: argument sets by tool name, in the order the tools are listed."""


def drawn_calls(tool: Tool, world: World) -> list[dict[str, Any]]:
    """Arguments drawn from the tool's input schema; strings come from text, the world's known
    strings and the string values of the tool's own examples (so a date parameter sometimes
    gets a date, a URL parameter a URL). The same tool in the same world gets the same draws,
    drawn once per run."""
    known = (*world.files, *strings_in(tool.spec.examples), *world.known_strings)
    return _drawn(tool.name, json.dumps(tool.spec.input_schema, sort_keys=True), known)


@functools.cache
def _drawn(name: str, schema: str, known: tuple[str, ...]) -> list[dict[str, Any]]:
    return draw_arguments(
        json.loads(schema), count=EXAMPLES_PER_TOOL, known_strings=known, seed_name=name
    )


def edge_calls(tool: Tool, world: World) -> list[dict[str, Any]]:
    """The tool's first example (or first drawn call), one argument at a time moved to an
    edge its schema allows (see `boundary_arguments`)."""
    examples = list(tool.spec.examples) or drawn_calls(tool, world)[:1]
    seen: dict[str, list[Any]] = {}
    for example in examples:
        for name, value in example.items():
            seen.setdefault(name, []).append(value)
    return boundary_arguments(tool.spec.input_schema, examples[0], seen)


PLANS: dict[str, Callable[[Tool, World], list[dict[str, Any]]]] = {
    "drawn": drawn_calls,
    "edges": edge_calls,
}


def make_plan(kind: str, tools: Sequence[Tool], world: World) -> Plan:
    # Made before anything runs: drawing is CPU work that would hold up the event loop.
    return {tool.name: PLANS[kind](tool, world) for tool in tools}


def strings_in(value: object) -> list[str]:
    """Every string in a JSON value, keys excepted, in order, without repeats."""
    found: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop(0)
        if isinstance(item, str) and item not in found:
            found.append(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return found


# --- through a running runtime's gate ------------------------------------------------------------


class CallsOnRequest:
    """The model: a user message "make call <id>" is answered with that call, anything else
    (the call's result, a timer firing, a background task ending) with a short text."""

    def __init__(self) -> None:
        self.calls: dict[str, ToolCall] = {}

    def __call__(self, messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        made = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
        for message in messages:
            if not isinstance(message, UserMessage):
                continue
            for call_id in re.findall(r"make call (\S+)", message.content):
                if call_id in self.calls and call_id not in made:
                    return use(self.calls[call_id])
        return say("done")


async def approve(request: ApprovalRequest) -> Verdict:
    return Verdict("allow", ("Approved by the test.",))


def agent_runtime(world: World, family: str, model: CallsOnRequest) -> Runtime:
    """A runtime as an agent has it: for "agent", the core tools, the perception tools, discovery
    and skills; for "execution", the execution tools alone. Its gate approves every ask."""
    outbox = Outbox()
    agent = family == "agent"
    skills = next(s for s in world.settings if isinstance(s, SkillsSettings))
    return Runtime(
        model=FunctionModel(model),
        tools=PERCEPTION_TOOLS if agent else EXECUTION_TOOLS,
        with_core_tools=agent,
        with_timers=agent,
        store_path=world.state / f"{family}.db",
        workdir=world.root,
        outbox=outbox,
        gate=replace(world.gate(), approvals=Approvals(outbox, handler=approve)),
        settings=[s for s in world.settings if s is not skills],
        discovery=DiscoverySettings() if agent else None,
        skills=skills if agent else None,
        evict_idle_after_seconds=None,
    )


async def call_in_runtime(
    runtime: Runtime, model: CallsOnRequest, call: ToolCall, session: str
) -> ToolMessage | None:
    """Have the model make `call` in `session`; its result once every session is idle."""
    model.calls[call.id] = call
    await runtime.submit(user_input(f"make call {call.id}", session=session))
    await runtime.wait_idle(include_tasks=False)  # background work may go on
    for message in runtime.sessions[session].trajectory.messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call.id:
            return message
    return None


@pytest.mark.parametrize("kind", list(PLANS))
@pytest.mark.parametrize("family", ["agent", "execution"])
async def test_no_tool_crashes_when_a_session_calls_it_through_the_gate(
    family: str, kind: str, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    model = CallsOnRequest()
    runtime = agent_runtime(world, family, model)
    plan = make_plan(kind, list(runtime.registry), world)
    findings = Findings()
    started = time.monotonic()
    async with runtime:
        for name, calls in plan.items():
            session = f"every-tool-{name}"
            for arguments in calls:
                call = ToolCall.make(name, **arguments)
                try:
                    with anyio.fail_after(CALL_SECONDS):
                        result = await call_in_runtime(runtime, model, call, session)
                except TimeoutError:
                    findings.broke(name, arguments, f"did not end in {CALL_SECONDS:g} s")
                    continue
                if result is None:
                    findings.broke(name, arguments, "left no result in the trajectory")
                    continue
                findings.judge(name, arguments, result.content, is_error=result.status != "ok")
    findings.report(f"{family} runtime, {kind}", time.monotonic() - started)
    findings.check([name for name, calls in plan.items() if calls], caplog)


# --- through the MCP bridge ----------------------------------------------------------------------


async def approve_elicitation(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True, "reason": "test"})


async def call_over_mcp(
    client: Client, name: str, arguments: dict[str, Any], findings: Findings
) -> None:
    """One call from the MCP client, judged."""
    try:
        with anyio.fail_after(CALL_SECONDS):
            result = await client.call_tool(name, arguments)
    except TimeoutError:
        findings.broke(name, arguments, f"did not end in {CALL_SECONDS:g} s")
        return
    except MCPError as exc:
        findings.broke(name, arguments, f"ended in a protocol error: {exc}")
        return
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    findings.judge(name, arguments, text, is_error=bool(result.is_error))


BRIDGE_FAMILIES: dict[str, Callable[[], list[Tool]]] = {
    "wakeful-agent-tools": agent_tools,
    "wakeful-execution": lambda: list(EXECUTION_TOOLS),
}


@pytest.mark.parametrize("kind", list(PLANS))
@pytest.mark.parametrize("server_name", list(BRIDGE_FAMILIES))
async def test_no_tool_crashes_when_an_mcp_client_calls_it_through_the_bridge(
    server_name: str, kind: str, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    tools = BRIDGE_FAMILIES[server_name]()
    plan = make_plan(kind, tools, world)
    server = build_server(
        server_name,
        tools,
        workdir=world.root,
        settings=world.settings,
        store_path=world.state / f"{server_name}.db",
        gate=world.gate(),
    )
    findings = Findings()
    started = time.monotonic()
    async with Client(server, elicitation_callback=approve_elicitation) as client:
        listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == list(plan)
        for name, calls in plan.items():
            for arguments in calls:
                await call_over_mcp(client, name, arguments, findings)
    findings.report(f"{server_name} over MCP, {kind}", time.monotonic() - started)
    findings.check([name for name, calls in plan.items() if calls], caplog)


# --- the judge itself ----------------------------------------------------------------------------


@tool
async def always_broken(
    text: Annotated[str, Field(description="Any text, e.g. 'a'.")],
) -> str:
    """Raises, as a tool with a bug would."""
    raise RuntimeError(f"a bug on {text!r}")


async def test_a_tool_that_raises_is_reported_as_a_crash(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    findings = Findings()
    async with Client(build_server("broken", [always_broken])) as client:
        for arguments in drawn_calls(always_broken, world)[:2]:
            result = await client.call_tool("always_broken", arguments)
            text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
            findings.judge("always_broken", arguments, text, is_error=bool(result.is_error))
    assert len(findings.problems) == 2
    crash = "crashed: Tool always_broken failed with RuntimeError"
    assert all(crash in problem for problem in findings.problems)
    with pytest.raises(AssertionError, match=r"logged an error: wakeful\.tools\.registry"):
        findings.check(["always_broken"], caplog)
