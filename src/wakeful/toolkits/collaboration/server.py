"""The collaboration server: subagents and requests to people, served over MCP by a running
runtime (`wakeful mcp serve collaboration`).

It lives with the collaboration toolkit, next to the perception and execution servers, rather
than in :mod:`wakeful.subagents`: it serves the human tools and the notifications as much as
the subagent tools, and the subagents package stays a layer the runtime builds on.

Each client connection is a parent session of its own, `mcp:<connection id>`: the subagents it
spawns are its own (list_subagents, send_message_to_subagent and cancel_subagent see only them),
and they are cancelled when it disconnects, since nobody is left to read their results.

A client is not an agent: it has no event stream for results that arrive later. So:

- `spawn_subagent` in `sync` mode returns the child's result as the call's result; in `async`
  (or `stream`) mode it returns the subagent id at once, and `wait_subagent(id, timeout)`
  returns the result, or says the child is still running. The server waits for every child of
  a connection itself, so no result is handed to a session that is not there; the child's
  progress is its `last_message` in list_subagents.
- `request_human_approval` / `request_human_input` wait for the decision within the call (they
  take no `wait` argument here). The request is opened in the runtime's one queue of requests
  to people (:class:`~wakeful.safety.approvals.Approvals`), so it reaches the person through
  the runtime's channels and is answered by `/approve ID` like any other. When the client
  declared the elicitation capability, the question is also put to the client's user through
  MCP elicitation; the first answer wins. The timeout and the default apply either way: they
  are the queue's.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from ...errors import ToolError
from ...events import SUBAGENT_QUESTION, Event
from ...mcp.bridge import (
    BridgeServer,
    ClientConnection,
    call_tool_result,
    mcp_tool,
    wait_reporting_progress,
)
from ...messages import ToolCall
from ...safety.approvals import Approvals
from ...safety.decisions import duration_words
from ...safety.human_requests import ApprovalRequest
from ...services import Services
from ...subagents.manager import Subagents
from ...subagents.tools import PARENT_TOOLS
from ...tools.pipeline import assemble_pipeline
from ...tools.registry import ToolRegistry
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ...tools.tasks import TaskHandle, TaskManager
from .human import HUMAN_TOOLS
from .notify import NOTIFY_TOOLS

__all__ = [
    "ELICITATION_KEY",
    "NO_AGENTS",
    "SERVER_NAME",
    "SUBAGENT_TOOLS",
    "collaboration_server",
    "wait_subagent",
]

log = logging.getLogger(__name__)

SERVER_NAME = "wakeful-collaboration"

ELICITATION_KEY = "wakeful_request"
"""The key of the question in an input-required result (2026-era clients)."""

NO_AGENTS = (
    "no agents are defined: add [[agents]] to wakeful.toml (or agents/<name>/AGENT.md folders) "
    "and restart the server"
)
"""Why the subagent tools are off when the runtime has no agent definitions."""

INSTRUCTIONS = """\
Collaboration tools backed by a wakeful runtime. Delegate work to subagents: spawn_subagent with
mode 'sync' returns the child's result; with 'async' ('stream' is the same here) it returns a
subagent id at once: fetch the result with wait_subagent, follow it with list_subagents, send it
instructions or answers with send_message_to_subagent, stop it with cancel_subagent. Your
subagents are this connection's own and are cancelled when it closes. Ask a person:
request_human_approval (a decision among options) and request_human_input (values for a form)
wait for the answer; no answer within timeout_seconds applies the default, and the result says
so. The person is asked through this client when it supports elicitation, and through the
runtime's channels in any case (the first answer wins). Notify approvers and collaborators:
send_im_notification, send_email_notification, send_slack_message (configured addresses
only)."""


@tool(
    annotations=ToolAnnotations(read_only=True, destructive=False, idempotent=True),
    examples=({"subagent_id": "sub_1a2b3c4d", "timeout_seconds": 60},),
)
async def wait_subagent(
    ctx: ToolContext,
    subagent_id: Annotated[
        str, Field(pattern=r"^sub_[0-9a-f]{8}$", description="e.g. 'sub_1a2b3c4d'.")
    ],
    timeout_seconds: Annotated[
        float,
        Field(
            gt=0,
            le=3600,
            description="How long to wait for its result, in seconds, e.g. 60.",
        ),
    ] = 60,
) -> str:
    """Wait for the result of a subagent you spawned in async mode.

    Use it when you need the delegated work's result before going on; list_subagents shows how
    it is doing without waiting. Returns its result (or why it has none) once it ends; after
    timeout_seconds, that it is still running and its last message: call again to keep
    waiting. It does not stop the subagent (cancel_subagent does).
    Cost: as long as the subagent takes, at most timeout_seconds; about 300 characters plus
    the child's result.
    """
    waiting = ctx.services.state.get(ConnectionChildren)
    handle = waiting.handles.get(subagent_id) if isinstance(waiting, ConnectionChildren) else None
    if handle is None:
        raise ToolError(
            f"You have no subagent {subagent_id} spawned in async mode on this connection; "
            "list_subagents shows yours (a sync one's result came with its spawn call)."
        )
    found = ctx.services.state.get(Subagents)
    subagents = found if isinstance(found, Subagents) else None
    with anyio.move_on_after(timeout_seconds):
        while True:
            question = subagents.open_question(subagent_id) if subagents else None
            if question is not None:
                return (
                    f"{subagent_id} asks: {json.dumps(question, ensure_ascii=False)}. It waits "
                    "for your answer: send it with send_message_to_subagent, then call "
                    "wait_subagent again."
                )
            async with anyio.create_task_group() as tg:
                if isinstance(waiting, ConnectionChildren):
                    tg.start_soon(_cancel_when, waiting.asked, tg.cancel_scope)
                result = await handle.wait()
                tg.cancel_scope.cancel()
                if result.is_error:
                    raise ToolError(result.content)
                return result.content
    last = ""
    if isinstance(found, Subagents):
        mine = {c["id"]: c for c in await found.listing(ctx.session)}
        last = str(mine.get(subagent_id, {}).get("last_message") or "")
    said = f' Its last message: "{last}".' if last else ""
    return (
        f"{subagent_id} is still running after {duration_words(timeout_seconds)}.{said} Call "
        "wait_subagent again to keep waiting, or cancel_subagent to stop it."
    )


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


SUBAGENT_TOOLS: tuple[Tool, ...] = (*PARENT_TOOLS, wait_subagent)
"""The subagent tools a collaboration server offers when agents are defined."""


@dataclass
class ConnectionChildren:
    """The subagents one connection spawned in async mode, each with the task that waits for
    its result (a sync spawn call that runs in the background), and the signal that one of its
    children asked it something (ask_parent; wait_subagent then returns the question)."""

    handles: dict[str, TaskHandle] = field(default_factory=dict)
    asked: anyio.Event = field(default_factory=anyio.Event)

    async def receive(self, event: Event) -> None:
        """The connection is its children's parent: a question wakes those waiting on them;
        progress and results it reads through list_subagents and wait_subagent."""
        if event.kind == SUBAGENT_QUESTION:
            self.asked.set()
            self.asked = anyio.Event()


@dataclass(frozen=True)
class _AskedPerson:
    """A question put to a 2026-era client in an input-required result, until it answers."""

    request_id: str
    waiting: TaskHandle
    tool: str
    arguments: dict[str, Any]


@dataclass
class _Connection:
    """One client connection: its parent session, and the questions put to its user in
    input-required results, by the requestState that comes back with the answer."""

    session: str
    asked: dict[str, _AskedPerson] = field(default_factory=dict)


def collaboration_server(
    services: Services,
    approvals: Approvals,
    subagents: Subagents | None,
    *,
    subagents_off: str = NO_AGENTS,
) -> BridgeServer:
    """An MCP server named "wakeful-collaboration" over a running runtime's parts: its services
    (outbox, store, settings), its queue of requests to people, and its subagents (None: the
    subagent tools are off, and the instructions say why: `subagents_off`)."""
    tools: list[Tool] = [*HUMAN_TOOLS, *NOTIFY_TOOLS]
    instructions = INSTRUCTIONS
    if subagents is not None:
        tools[:0] = SUBAGENT_TOOLS
    else:
        names = ", ".join(t.name for t in SUBAGENT_TOOLS)
        instructions += f"\n\nOff on this server: {names}, because {subagents_off}."
    registry = ToolRegistry(tools)
    executor = assemble_pipeline(registry)
    listed = types.ListToolsResult(tools=[_listed(t) for t in registry])
    schemas = {t.name: t.input_schema for t in listed.tools}
    human = {t.name for t in HUMAN_TOOLS}

    async def list_tools(
        ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if params is not None and params.cursor is not None:
            raise MCPError(
                INVALID_PARAMS,
                f"Invalid params: the cursor {params.cursor!r} was not given by this server; "
                "its tools/list answers in one page, so list without a cursor.",
            )
        return listed

    async def call_tool(
        ctx: ServerRequestContext[Services], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        services = ctx.lifespan_context
        if registry.get(params.name) is None:
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown tool {params.name!r}. This server's tools are: "
                f"{', '.join(registry.names)}; list them with tools/list."
                + (f" The subagent tools are off: {subagents_off}." if subagents is None else ""),
            )
        connection: _Connection = services.state[_Connection]
        if params.request_state is not None:
            return await _answered_in_client(ctx, approvals, connection, params)
        request = str(ctx.request_id) if ctx.request_id is not None else "notification"
        call_id = f"{_connection_id(services)}-{request}"
        arguments = dict(params.arguments or {})

        def start(arguments: dict[str, Any]) -> TaskHandle:
            """The call as a task of the connection (closing it cancels the call)."""
            call = ToolCall(
                id=call_id,
                name=params.name,
                arguments=json.dumps(arguments, ensure_ascii=False),
            )
            tool_ctx = ToolContext(
                session=connection.session,
                call_id=call_id,
                tool_name=params.name,
                services=services,
            )

            async def run(handle: TaskHandle) -> ToolResult:
                return await executor.execute(call, replace(tool_ctx, task=handle))

            return services.tasks.start(
                session=connection.session,
                tool=params.name,
                run=run,
                call_id=call_id,
                description=f"MCP call {params.name}",
            )

        if params.name in human:
            if "wait" in arguments:
                return call_tool_result(
                    ToolResult.error(
                        "Over MCP the call always waits for the answer: leave out `wait`."
                    )
                )
            # The call waits for the decision in the queue; the person is asked meanwhile.
            waiting = start({**arguments, "wait": True})
            return await _ask_person(
                ctx, approvals, connection, params.name, arguments, call_id, waiting
            )
        if params.name == "spawn_subagent" and arguments.get("mode") in ("async", "stream"):
            assert subagents is not None  # listed only with agents
            return await _spawn_in_background(
                services, subagents, connection, call_id, start({**arguments, "mode": "sync"})
            )
        return call_tool_result(await wait_reporting_progress(ctx, start(arguments)))

    @asynccontextmanager
    async def lifespan(_: Server[Services]) -> AsyncIterator[Services]:
        async with anyio.create_task_group() as tg:
            tasks = TaskManager(tg, _drop_event)
            client = ClientConnection()
            state: dict[type[Any], Any] = {
                ClientConnection: client,
                Approvals: approvals,
                ConnectionChildren: ConnectionChildren(),
                _Connection: _Connection(session=f"mcp:{client.id}"),
            }
            children = state[ConnectionChildren]
            if subagents is not None:
                state[Subagents] = subagents
                # The connection is the parent of its children: their questions come here, not
                # to a runtime session.
                subagents.outside_parents[state[_Connection].session] = children.receive
            # The runtime's outbox, store and settings; the tasks and the state are the
            # connection's own (the runtime's services are not changed).
            connection_services = replace(
                services, tasks=tasks, emit=_drop_event, timers=None, state=state
            )
            try:
                yield connection_services
            finally:
                # Its waiting subagents are cancelled with their waits (nobody is left to read
                # their results), and its open requests are withdrawn.
                tasks.cancel_all("the MCP connection closed")
                if subagents is not None:
                    subagents.outside_parents.pop(state[_Connection].session, None)

    return Server(
        SERVER_NAME,
        version=_wakeful_version(),
        instructions=instructions,
        lifespan=lifespan,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _connection_id(services: Services) -> str:
    """The connection's id (call ids are made unique across connections with it)."""
    return str(services.state[ClientConnection].id)


def _listed(found: Tool) -> types.Tool:
    """The MCP description of a tool as served here: the human tools take no `wait`."""
    listed = mcp_tool(found)
    properties = listed.input_schema.get("properties", {})
    if found.name in {t.name for t in HUMAN_TOOLS} and "wait" in properties:
        schema = dict(listed.input_schema)
        schema["properties"] = {k: v for k, v in properties.items() if k != "wait"}
        return listed.model_copy(update={"input_schema": schema})
    return listed


async def _spawn_in_background(
    services: Services,
    subagents: Subagents,
    connection: _Connection,
    call_id: str,
    waiting: TaskHandle,
) -> types.CallToolResult:
    """Return the child's id as soon as it is recorded, while a sync spawn call waits for its
    result in the background (so it is never handed to a session that is not there)."""
    while True:
        for record in await subagents.repository.children(connection.session):
            if record.parent_call == call_id:
                services.state[ConnectionChildren].handles[record.id] = waiting
                return call_tool_result(
                    ToolResult.of(
                        {
                            "subagent_id": record.id,
                            "status": "running",
                            "note": f"Fetch its result with wait_subagent(subagent_id="
                            f"{record.id!r}); list_subagents shows its last message.",
                        }
                    )
                )
        if waiting.done:  # refused before a child was made (unknown agent, a limit)
            return call_tool_result(await waiting.wait())
        await anyio.sleep(0.01)


async def _ask_person(
    ctx: ServerRequestContext[Services],
    approvals: Approvals,
    connection: _Connection,
    tool_name: str,
    arguments: dict[str, Any],
    call_id: str,
    waiting: TaskHandle,
) -> types.CallToolResult | types.InputRequiredResult:
    """Wait for the decision on the request the call opens (the call, `waiting`, waits for it
    in the queue), asking the client's user too when it can be asked (elicitation)."""
    request_id = await _opened_by(approvals, call_id, waiting)
    if request_id is None:  # refused before anyone was asked (bad input)
        return call_tool_result(await wait_reporting_progress(ctx, waiting))
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.elicitation is None:
        return call_tool_result(await wait_reporting_progress(ctx, waiting))
    message, schema = _question_for_client(approvals, request_id, tool_name, arguments)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # A 2026-era client cannot be sent a request: it gets the question in an input-required
        # result and calls again with the answer, meanwhile the request waits in the queue.
        token = secrets.token_hex(8)
        connection.asked[token] = _AskedPerson(request_id, waiting, tool_name, arguments)
        form = types.ElicitRequestFormParams(message=message, requested_schema=schema)
        return types.InputRequiredResult(
            input_requests={ELICITATION_KEY: types.ElicitRequest(params=form)},
            request_state=token,
        )

    async def ask_client() -> None:
        try:
            answer = await ctx.session.elicit_form(
                message, schema, related_request_id=ctx.request_id
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError) as exc:
            log.warning("request %s could not be put to the MCP client: %s", request_id, exc)
            return  # the request waits in the queue
        apply_client_answer(approvals, request_id, answer)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask_client)
        result = await wait_reporting_progress(ctx, waiting)
        tg.cancel_scope.cancel()  # answered elsewhere, or timed out: stop asking
    return call_tool_result(result)


async def _answered_in_client(
    ctx: ServerRequestContext[Services],
    approvals: Approvals,
    connection: _Connection,
    params: types.CallToolRequestParams,
) -> types.CallToolResult:
    """The second round of a 2026-era call: apply the client user's answer, then wait for the
    decision (an answer after the timeout is recorded, not applied: the default stands)."""
    asked = connection.asked.pop(params.request_state or "", None)
    if asked is None or asked.tool != params.name:
        raise MCPError(
            INVALID_PARAMS,
            f"Invalid params: the requestState {params.request_state!r} was not given by this "
            "connection for this tool, or was answered already; call the tool again without it.",
        )
    answer = (params.input_responses or {}).get(ELICITATION_KEY)
    if isinstance(answer, types.ElicitResult):
        apply_client_answer(approvals, asked.request_id, answer)
    return call_tool_result(await wait_reporting_progress(ctx, asked.waiting))


async def _opened_by(approvals: Approvals, call_id: str, waiting: TaskHandle) -> str | None:
    """The id of the request the call opens, once it is open; None when the call ended
    without opening one."""
    while True:
        for request in (*approvals.pending(), *approvals.pending_inputs()):
            if request.call_id == call_id:
                return request.id
        if waiting.done:
            return None
        await anyio.sleep(0.01)


def _question_for_client(
    approvals: Approvals, request_id: str, tool_name: str, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The elicitation's message and form for an open request."""
    request = approvals.get(request_id)
    question = str(arguments.get("question", ""))
    default = ""
    if request is not None:
        words = (
            request.default or request.options[1]
            if isinstance(request, ApprovalRequest)
            else request.default_words()
        )
        timeout = duration_words(request.timeout_seconds or approvals.timeout_seconds)
        default = f" No answer within {timeout} applies the default: {words or 'nothing'}."
    message = f"The agent asks [{request_id}]: {question}{default}"
    if isinstance(request, ApprovalRequest):
        yes, no = request.options
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": f"{yes.capitalize()}?",
                    "description": f"Yes: {yes}; no: {no}.",
                },
                "reason": {"type": "string", "title": "Why (optional)"},
            },
            "required": ["approve"],
        }
    elif tool_name == "request_human_approval":
        options = [str(o) for o in arguments.get("options", [])]
        schema = {
            "type": "object",
            "properties": {"choice": {"type": "string", "title": "Your choice", "enum": options}},
            "required": ["choice"],
        }
    else:
        schema = dict(arguments.get("schema") or {"type": "object", "properties": {}})
    return message, schema


def apply_client_answer(approvals: Approvals, request_id: str, answer: types.ElicitResult) -> None:
    """Answer an open request with the client user's elicitation answer. Declined or dismissed,
    the request's default applies; an answer to a request that has ended is recorded on it,
    not applied (the queue's rule)."""
    request = approvals.get(request_id)
    if request is None:
        return
    content = dict(answer.content or {})
    reason = str(content.pop("reason", "") or "").strip()
    if isinstance(request, ApprovalRequest):
        yes, no = request.options
        if answer.action == "accept" and isinstance(content.get("approve"), bool):
            approvals.resolve(request_id, bool(content["approve"]), reason)
            return
        said = {"accept": "answered without a yes or no", "decline": "declined"}.get(
            answer.action, "dismissed"
        )
        approvals.resolve(
            request_id,
            (request.default or no) == yes,
            f"{said} in the MCP client; the default ({request.default or no}) applies",
        )
        return
    if answer.action == "accept":
        reply = approvals.answer_input(request_id, content)
        if not reply.accepted:
            log.warning("the MCP client's answer to %s was not taken: %s", request_id, reply.text)
        return
    approvals.decline_input(
        request_id, "declined in the MCP client" if answer.action == "decline" else "dismissed"
    )


def _wakeful_version() -> str:
    """This wakeful's version, for serverInfo ("unknown" when it is not installed)."""
    try:
        return metadata.version("wakeful")
    except metadata.PackageNotFoundError:
        return "unknown"


async def _drop_event(event: Event) -> None:
    # A client has no session to deliver runtime events to: it gets results in its calls.
    log.debug("dropped event %s from a collaboration MCP call", event.kind)
