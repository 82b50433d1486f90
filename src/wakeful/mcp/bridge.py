"""Serve wakeful :class:`~wakeful.tools.spec.Tool` objects over MCP.

The server is the SDK's low-level `mcp.server.Server`, not `MCPServer`: `MCPServer` derives each
tool's schema from a Python signature, while our tools already carry a finished JSON schema and
their own validation. The low-level server takes `on_list_tools`/`on_call_tool` handlers, so the
schema goes out exactly as `ToolSpec.input_schema` says and every call goes through the same tool
pipeline a session uses (:func:`~wakeful.tools.pipeline.assemble_pipeline`, assembled once per
connection): our validation, our error messages, nothing re-validated by the SDK.
`Client(server)`, stdio and Streamable HTTP all accept this server.

Tools that take a context get a real :class:`~wakeful.services.Services`, built per connection in
the server's lifespan around a task group of its own: every call runs as a task of that group's
:class:`~wakeful.tools.tasks.TaskManager` (so output lines and progress are recorded). Events the
tools emit have no session to go to and are dropped.

Progress and timeouts: when a client's call carries a `progressToken`, the bridge sends
`notifications/progress` for it at least every `PROGRESS_INTERVAL_SECONDS` while the call runs
(progress is the seconds elapsed; the message is the latest output line, or how long it has run).
The client's own timeout still applies: a client that resets its timeout on progress (the
TypeScript SDK's `resetTimeoutOnProgress`) waits for as long as the call runs; one that does not
gives up after its timeout and cancels the request, which stops the call and its processes. For
work longer than that, run it in the background (`shell_exec` with background=true).

Server features besides tools, where the caller asks for them: a root's files as resources
(:mod:`.resources`), skills as prompts (:mod:`.prompts`), completion of the resource template's
path (:mod:`.completions`); every bridge server honours `logging/setLevel` (:mod:`.client_log`).

Protocol errors: the tools, prompts and resource templates are listed in one page (no
`nextCursor`), so a list request that carries a cursor is -32602 "Invalid params" naming it, as
is a resources/list cursor past the last file; an unknown tool is -32602 too. An `initialize`
asking for a protocol version this server does not support is answered, by the SDK, with the
latest version it does support (the specification's rule: the client then decides whether to
go on), not with an error.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..core.executor import ToolExecutor
from ..errors import UserError
from ..events import Event
from ..messages import ToolCall
from ..safety.gate import ApprovalDeferred, Asker, CallGate
from ..safety.verdict import Verdict
from ..services import Services, close_state, state_of
from ..storable_text import repair_strings, replace_lone_surrogates
from ..tools.pipeline import assemble_pipeline
from ..tools.registry import ToolRegistry
from ..tools.spec import Tool, ToolContext, ToolResult
from ..tools.tasks import TaskHandle, TaskManager
from .client_log import ClientLog
from .completions import complete
from .prompts import SkillPrompts
from .resources import FileResources

if TYPE_CHECKING:
    from ..store.sqlite import Store

log = logging.getLogger(__name__)

BridgeServer = Server[Services]
"""What :func:`build_server` returns: a low-level MCP server whose lifespan state is Services."""

PROGRESS_INTERVAL_SECONDS = 10.0
"""Seconds between two progress notifications of a running call (for clients that asked)."""

PROGRESS_MESSAGE_CHARS = 200
"""The most characters of an output line a progress message carries."""


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """One client's connection to a bridge server, named by a random id for its life.

    The bridge puts one in the services' state of every connection, so a tool can tell that it is
    served over MCP (:func:`served_over_mcp`): its events go nowhere there."""

    id: str = field(default_factory=lambda: f"c{secrets.token_hex(4)}")


def served_over_mcp(services: Services) -> bool:
    """Whether these services are an MCP connection's (where runtime events are dropped)."""
    return isinstance(services.state.get(ClientConnection), ClientConnection)


_Request = tuple[ServerRequestContext[Services], types.CallToolRequestParams]


@dataclass(frozen=True, slots=True)
class _ConnectionCalls:
    """A connection's tool pipeline, and the request of each call in flight by call id (a call
    the gate asks a person about is put to the user of the client that sent it)."""

    tools: ToolExecutor
    requests: dict[str, _Request]


def build_server(
    name: str,
    tools: Sequence[Tool],
    *,
    instructions: str | None = None,
    workdir: Path | None = None,
    version: str | None = None,
    settings: Sequence[object] = (),
    store_path: Path | None = None,
    gate: CallGate | None = None,
    resources: FileResources | None = None,
    prompts: SkillPrompts | None = None,
) -> BridgeServer:
    """An MCP server that lists `tools` and runs their calls through wakeful's validation.

    `workdir` becomes `Services.workdir` for the tools' context: the directory file and shell
    tools work in; `settings` become `Services.settings` (by class). With `store_path`, a
    wakeful store is opened there for the connection's life (idempotency keys, confirmation
    tokens, the audit log). With `gate`, every call passes the safety layers; a call they would
    ask a person about is put to the client's user through MCP elicitation, and refused when the
    client cannot ask. With `resources`, the root's files are served as resources (with a
    template whose path argument is completed); with `prompts`, skills as prompts. Raises
    UserError if two tools share a name.
    """
    try:
        registry = ToolRegistry(tools)
    except UserError as exc:
        raise UserError(f"Cannot build the MCP server {name!r}: {exc}") from exc
    listed = types.ListToolsResult(tools=[mcp_tool(t) for t in registry])

    async def list_tools(
        ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        _refuse_cursor("tools/list", params)
        return listed

    async def call_tool(
        ctx: ServerRequestContext[Services], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        # JSON-RPC ids restart with every connection: prefixed with the connection's own id,
        # call ids (saved outputs, audit rows) and sessions never collide across clients.
        connection = state_of(ctx.lifespan_context, ClientConnection).id
        request = str(ctx.request_id) if ctx.request_id is not None else "notification"
        call_id = f"{connection}-{request}"
        call = ToolCall(
            id=call_id,
            name=params.name,
            arguments=json.dumps(params.arguments or {}, ensure_ascii=False),
        )
        tool_ctx = ToolContext(
            session=f"mcp:{name}:{connection}",
            call_id=call_id,
            tool_name=params.name,
            services=ctx.lifespan_context,
        )
        found = registry.get(params.name)
        if found is None:  # a protocol error, as the specification has it, not a tool result
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown tool {params.name!r}. This server's tools are: "
                f"{', '.join(registry.names) or '(none)'}; list them with tools/list.",
            )
        calls: _ConnectionCalls = tool_ctx.services.state[_ConnectionCalls]
        asked: list[_AskInNextRound] = []

        async def run(handle: TaskHandle) -> ToolResult:
            try:
                return await calls.tools.execute(call, replace(tool_ctx, task=handle))
            except _AskInNextRound as pending:
                asked.append(pending)
                return ToolResult.error("A person's approval was asked for in the result.")

        # The call runs as an inline task of the connection, so its output lines are recorded
        # (for progress messages) and closing the connection cancels it.
        calls.requests[call_id] = (ctx, params)
        try:
            handle = tool_ctx.services.tasks.start(
                session=tool_ctx.session,
                tool=params.name,
                run=run,
                call_id=call_id,
                description=f"MCP call {params.name}",
            )
            result = await wait_reporting_progress(ctx, handle)
        finally:
            del calls.requests[call_id]
        if asked:
            return types.InputRequiredResult(input_requests={APPROVAL_KEY: asked[0].request})
        return call_tool_result(result)

    shared = SharedStore(store_path) if store_path is not None else None

    @asynccontextmanager
    async def lifespan(_: Server[Services]) -> AsyncIterator[Services]:
        async with AsyncExitStack() as stack:
            store = await stack.enter_async_context(shared.using()) if shared else None
            requests: dict[str, _Request] = {}

            async def ask(call: ToolCall, summary: str, reasons: tuple[str, ...]) -> Verdict:
                request, params = requests[call.id]
                return await ask_client_user(request, params, call.name, summary, reasons)

            tools = assemble_pipeline(registry, gate=_gate_for_connection(gate, store, ask))
            tg = await stack.enter_async_context(anyio.create_task_group())
            client_log = ClientLog()
            client_log.attach()
            stack.callback(client_log.detach)
            tg.start_soon(client_log.forward)
            tasks = TaskManager(tg, _drop_event)
            services = Services(
                tasks=tasks,
                emit=_drop_event,
                workdir=workdir,
                settings={type(value): value for value in settings},
                store=store,
                state={
                    ClientConnection: ClientConnection(),
                    _ConnectionCalls: _ConnectionCalls(tools, requests),
                    ClientLog: client_log,
                },
            )
            try:
                yield services
            finally:
                tasks.cancel_all("the MCP connection closed")
                with anyio.CancelScope(shield=True):
                    await close_state(services)

    server: BridgeServer = Server(
        name,
        **_feature_handlers(resources, prompts),
        version=version if version is not None else _wakeful_version(),
        instructions=instructions,
        lifespan=lifespan,
        get_tool_input_schema=lambda tool_name: _input_schema(registry, tool_name),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    # Added as a plain handler: the constructor's on_set_logging_level warns that logging is
    # deprecated in the 2026-07-28 protocol; handshake-era clients (most today) still use it.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_logging_level)
    return server


def _refuse_cursor(method: str, params: types.PaginatedRequestParams | None) -> None:
    """A list this server answers in one page gives no nextCursor, so any cursor sent with it
    was not given by this server: the protocol's -32602, naming the cursor."""
    cursor = params.cursor if params is not None else None
    if cursor is not None:
        raise MCPError(
            INVALID_PARAMS,
            f"Invalid params: the cursor {cursor!r} was not given by this server; its "
            f"{method} answers in one page with no nextCursor, so list without a cursor.",
        )


async def set_logging_level(
    ctx: ServerRequestContext[Services], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    """logging/setLevel: this connection's client gets log records at or above the level."""
    state_of(ctx.lifespan_context, ClientLog).set_level(ctx.session, params.level)
    return types.EmptyResult()


def _feature_handlers(
    resources: FileResources | None, prompts: SkillPrompts | None
) -> dict[str, Any]:
    """The Server handlers for resources, prompts and completions, where they are served."""
    handlers: dict[str, Any] = {}
    if resources is not None:
        files = resources
        template = types.ListResourceTemplatesResult(resource_templates=[files.template()])

        async def list_resources(
            ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            cursor = params.cursor if params else None
            page = await files.list_page(cursor)
            if cursor is not None and not page.resources:
                # A nextCursor is only given when more entries follow: one that leads past
                # the end was not given by this server (or the root changed since).
                raise MCPError(
                    INVALID_PARAMS,
                    f"Invalid params: the cursor {cursor!r} of resources/list is past the last "
                    "resource, so this server did not give it (or the root changed since); "
                    "list again without a cursor.",
                )
            return page

        async def list_templates(
            ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            _refuse_cursor("resources/templates/list", params)
            return template

        async def read_resource(
            ctx: ServerRequestContext[Services], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            return await files.read(params.uri)

        handlers.update(
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
        )
    if prompts is not None:
        skills = prompts

        async def list_prompts(
            ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
        ) -> types.ListPromptsResult:
            _refuse_cursor("prompts/list", params)
            return skills.listed()

        async def get_prompt(
            ctx: ServerRequestContext[Services], params: types.GetPromptRequestParams
        ) -> types.GetPromptResult:
            return skills.get(params.name, params.arguments)

        handlers.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    if resources is not None or prompts is not None:

        async def completion(
            ctx: ServerRequestContext[Services], params: types.CompleteRequestParams
        ) -> types.CompleteResult:
            return await complete(resources, params)

        handlers.update(on_completion=completion)
    return handlers


async def wait_reporting_progress(
    ctx: ServerRequestContext[Services], handle: TaskHandle
) -> ToolResult:
    """The call's result; meanwhile, a progress report every interval.

    The SDK sends a report only where the client asked for progress (a `progressToken` over
    JSON-RPC, a callback in memory) and drops it otherwise; in memory, whether one was given
    cannot be read, so the reports are always made. If the request is cancelled (the client
    cancelled it, or the connection closed), the call's task is cancelled too, and waited for,
    so no process of it outlives the request."""
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_send_progress, ctx, handle)
            result = await handle.wait()
            tg.cancel_scope.cancel()
        return result
    finally:
        if not handle.done:
            handle.cancel("the MCP client cancelled the call")
            with anyio.CancelScope(shield=True):
                await handle.wait()


async def _send_progress(ctx: ServerRequestContext[Services], handle: TaskHandle) -> None:
    """Every interval, the seconds elapsed as progress and the latest output line as message."""
    started = time.monotonic()
    sent = 0.0
    while True:
        # Read at every round, so tests (and embedders) may change the module constant.
        await anyio.sleep(PROGRESS_INTERVAL_SECONDS)
        elapsed = time.monotonic() - started
        sent = max(round(elapsed, 1), sent + 0.1)  # strictly increasing, as MCP requires
        try:
            await ctx.session.report_progress(sent, None, progress_message(handle, elapsed))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the client is gone; the call's own wait notices the cancellation


def progress_message(handle: TaskHandle, elapsed: float) -> str:
    """The latest output line (cut to `PROGRESS_MESSAGE_CHARS`), or how long the call has run."""
    percent = f" ({handle.percent:g}%)" if handle.percent is not None else ""
    last = handle.last_lines(1)
    line = last[0].strip() if last else ""
    if not line:
        line = handle.progress_message
    if not line:
        return f"{handle.tool} running for {elapsed:.0f} s{percent}"
    if len(line) > PROGRESS_MESSAGE_CHARS:
        line = line[: PROGRESS_MESSAGE_CHARS - 1] + "…"
    return line + percent


class SharedStore:
    """One store for every connection of a server: opened by the first, closed by the last.

    A store admits one user at a time (its lock), and every client connection of a server runs
    its own lifespan (one per Streamable HTTP session), so connections share the open store.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store: Store | None = None
        self._users = 0
        self._lock = anyio.Lock()

    @asynccontextmanager
    async def using(self) -> AsyncIterator[Store]:
        async with self._lock:
            if self._store is None:
                from ..store.sqlite import Store

                await anyio.Path(self.path.parent).mkdir(parents=True, exist_ok=True)
                self._store = await Store.open(self.path)
            self._users += 1
            store = self._store
        try:
            yield store
        finally:
            with anyio.CancelScope(shield=True):
                async with self._lock:
                    self._users -= 1
                    if self._users == 0 and self._store is not None:
                        closing, self._store = self._store, None
                        await closing.close()


def _wakeful_version() -> str:
    """This wakeful's version, for serverInfo ("unknown" when it is not installed)."""
    try:
        return metadata.version("wakeful")
    except metadata.PackageNotFoundError:
        return "unknown"


def _gate_for_connection(gate: CallGate | None, store: Store | None, ask: Asker) -> CallGate | None:
    """The server's gate for one connection: a person is asked through the client's user, and
    the audit log is on this connection's store (when there is one and the gate has none)."""
    if gate is None:
        return None
    if store is None or gate.audit is not None:
        return replace(gate, ask=ask)
    from ..safety.audit import AuditLog

    return replace(gate, ask=ask, audit=AuditLog(store))


APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Run it?", "description": "Yes to run the call."},
        "reason": {"type": "string", "title": "Why (optional)"},
    },
    "required": ["approve"],
}


APPROVAL_KEY = "wakeful_approval"


class _AskInNextRound(ApprovalDeferred):
    """On a 2026-era connection the server cannot send the client a request; it answers
    "input required" with the question, and the client retries the call with the answer."""

    def __init__(self, request: types.ElicitRequest) -> None:
        super().__init__("approval asked in an input-required result")
        self.request = request


async def ask_client_user(
    ctx: ServerRequestContext[Services],
    params: types.CallToolRequestParams,
    tool_name: str,
    summary: str,
    reasons: tuple[str, ...],
) -> Verdict:
    """Ask the client's user about one call through MCP elicitation; no way to ask is a no.

    A 2026-era client gets the question in an input-required result and retries the call with
    the answer; an older one gets an `elicitation/create` request while the call waits."""
    answered = (params.input_responses or {}).get(APPROVAL_KEY)
    if isinstance(answered, types.ElicitResult):
        return _verdict_of(answered)
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return Verdict(
            "deny",
            (
                *reasons,
                "It needs a person's approval and this MCP client cannot ask one (it does not "
                "support elicitation), so it was not run. Use a client that supports "
                "elicitation, or change the policy.",
            ),
        )
    message = f"Approve {tool_name} {summary}?\n" + " ".join(reasons)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        form = types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
        raise _AskInNextRound(types.ElicitRequest(params=form))
    answer = await ctx.session.elicit_form(
        message, APPROVAL_SCHEMA, related_request_id=ctx.request_id
    )
    return _verdict_of(answer)


def _verdict_of(answer: types.ElicitResult) -> Verdict:
    content = answer.content or {}
    why = str(content.get("reason") or "").strip()
    if answer.action == "accept" and content.get("approve") is True:
        return Verdict("allow", (f"Approved by the client's user{': ' + why if why else '.'}",))
    if answer.action == "cancel":
        return Verdict("deny", ("The client's user dismissed the approval request.",))
    return Verdict("deny", (f"The client's user declined{': ' + why if why else '.'}",))


def mcp_tool(tool: Tool) -> types.Tool:
    """The MCP description of one tool: schema as is, annotations mapped, examples appended."""
    spec = tool.spec
    hints = spec.annotations
    return types.Tool(
        name=spec.name,
        description=describe_for_mcp(tool),
        input_schema=spec.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        ),
    )


def describe_for_mcp(tool: Tool) -> str:
    """The description with the examples appended, one JSON object of arguments per line.

    MCP tools have no field for examples, and a model reads the description anyway.
    """
    examples = tool.spec.examples
    if not examples:
        return tool.spec.description
    lines = "\n".join(json.dumps(example, ensure_ascii=False) for example in examples)
    return f"{tool.spec.description.rstrip()}\n\nExamples:\n{lines}"


def call_tool_result(result: ToolResult) -> types.CallToolResult:
    """Our result as MCP's: the text as is, structured data as structuredContent.

    MCP wants structuredContent to be an object, so other JSON values go under "result". Lone
    UTF-16 surrogates, which no JSON encoder can send, are replaced visibly with U+FFFD (as the
    store does), so any tool's odd text still reaches the client.
    """
    structured: dict[str, Any] | None
    repaired, _ = repair_strings(result.structured)
    if repaired is None:
        structured = None
    elif isinstance(repaired, dict):
        structured = repaired
    else:
        structured = {"result": repaired}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=replace_lone_surrogates(result.content))],
        structured_content=structured,
        is_error=result.is_error,
    )


def _input_schema(registry: ToolRegistry, tool_name: str) -> dict[str, Any] | None:
    found = registry.get(tool_name)
    return None if found is None else found.spec.input_schema


async def _drop_event(event: Event) -> None:
    # Over MCP there is no session to deliver runtime events to; the client sees the result.
    log.debug("dropped event %s from an MCP tool call", event.kind)
