"""The connection to one MCP server, and the task that owns it.

`MCPConnection.run` is that task: it starts the server (or connects to its URL), subscribes to
changes of its tool list, lists its tools, checks its health, and when the connection is lost
(the process exited, or it stopped answering) reports it and starts again with exponential
backoff. A server whose program is missing is reported once and not retried. Calls are sent by
`MCPConnection.call` from the calling tool's task, since the SDK multiplexes requests.

What the client itself can give, it answers, in the older protocol's server-to-client requests as
in the 2026-07-28 input-required results: its roots (the configured `roots`, else the runtime's
workdir; no roots capability when there is neither), for a server configured
`allow_sampling = true` only, a run of the runtime's model (:mod:`.sampling`), and, for a server
with `allow_elicitation` in a runtime that can ask a person, that person's answer
(:mod:`.elicitation`). While a person is asked, the call's timeouts are held: the person has the
approvals' timeout, not the call's. What the person was asked and how it ended is added to the
call's result for the agent. A call that stops to ask for input this client cannot collect (the
URL-elicitation-required error, or elicitation not allowed) ends with advice that fits
(:mod:`.input`).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO, cast

import anyio
import httpx2
import mcp_types
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp import Client, StdioServerParameters

from ..tools.spec import ToolContext, ToolResult
from .config import MCPServerConfig
from .elicitation import CallOrigin, MCPElicitation
from .input import asked_by_error, asked_by_result, needs_input_result
from .results import tool_result_from_mcp
from .sampling import MCPSampler
from .transport import watched

log = logging.getLogger(__name__)

ServerState = Literal["connecting", "ready", "unavailable", "failed"]

CLIENT_INFO = mcp_types.Implementation(name="wakeful", version="0.1.0")
_LISTING_PAGES = 100
_STDERR_TAIL_BYTES = 4000
# How often a call is resent when the server answers "input required" with only its state (it
# asks to be polled), and the pause before each: the SDK's own numbers.
_POLL_ROUNDS = 10
_POLL_FIRST_DELAY = 0.05
_POLL_MAX_DELAY = 0.25


class ConnectionOwner(Protocol):
    """What a connection tells about itself: alerts for the agent, and changes of its tools."""

    async def alert(self, server: str, text: str, **context: Any) -> None: ...

    async def rebuild(self) -> None: ...

    async def notify_changed(self) -> None: ...


class MCPConnection:
    """One server: the task that owns its connection, its state, and the calls sent to it."""

    def __init__(
        self,
        config: MCPServerConfig,
        owner: ConnectionOwner,
        server: MCPServer | Server[Any] | None,
        *,
        roots: Sequence[Path] = (),
        sampler: MCPSampler | None = None,
        elicitation: MCPElicitation | None = None,
    ) -> None:
        self.config = config
        # Asks a person for the server's elicitations; None: no elicitation capability.
        self.elicitation = elicitation
        # The calls in flight, for a server-to-client request that does not say its call.
        self._calls: list[_CallInFlight] = []
        # What the server is told it may work in (MCP roots); none: no roots capability.
        self.roots = [_root(path) for path in roots]
        # Answers its sampling requests; None (not allowed): no sampling capability.
        self.sampler = sampler
        self.owner = owner
        self.server_object = server
        self.state: ServerState = "connecting"
        self.detail = ""
        self._listing: list[mcp_types.Tool] = []
        self.offered: frozenset[str] = frozenset()  # the names in `listing`, checked per call
        self.restarts = 0
        self.client: Client | None = None
        self.settled = anyio.Event()  # set once the first connection attempt has an outcome
        self._probe_now = anyio.Event()
        self._relist = anyio.Event()
        self._stderr: TextIO | None = None
        self.last_stderr = ""  # what the server process last wrote to stderr before it closed
        self.instructions: str | None = None  # what the server said when it was initialised
        # Tools of the listing that are not offered (changed since pinned, poisoned, task-only),
        # with the error a call to one returns; kept by the toolset's checks.
        self.disabled: dict[str, str] = {}
        # Tools of the listing that run only as MCP tasks (a subset of `disabled`).
        self.task_only: frozenset[str] = frozenset()
        # Whether the server has listed its tools at least once: until then there is nothing
        # to pin (pinning the empty list would make every real tool look new).
        self.has_listed = False

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def listing(self) -> list[mcp_types.Tool]:
        """The tools the server last listed."""
        return self._listing

    @listing.setter
    def listing(self, tools: list[mcp_types.Tool]) -> None:
        self._listing = tools
        self.offered = frozenset(t.name for t in tools)

    # --- the owning task ----------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, and restart with backoff until cancelled (or the config is wrong)."""
        cfg = self.config
        failures = 0
        while True:
            problem = await self._preflight()
            if problem is not None:
                await self._fail(problem)
                return
            started = anyio.current_time()
            reason, was_ready = await self._connect_and_serve()
            # A server that stayed up for a while starts its backoff afresh.
            if was_ready and anyio.current_time() - started >= cfg.restart_max_delay_seconds:
                failures = 0
            delay = min(
                cfg.restart_initial_delay_seconds * 2**failures, cfg.restart_max_delay_seconds
            )
            failures += 1
            await self._lost(reason, was_ready, delay)
            await anyio.sleep(delay)
            self.restarts += 1

    async def _preflight(self) -> str | None:
        """Why the server cannot be started at all (a configuration mistake), or None."""
        cfg = self.config
        if cfg.command is None:
            return None
        if cfg.cwd is not None and not await anyio.Path(cfg.cwd).is_dir():
            return (
                f"its working directory {str(cfg.cwd)!r} does not exist. Fix `cwd` in the "
                f"configuration of MCP server {self.name!r}"
            )
        program = cfg.command[0]
        if os.sep in program and not os.path.isabs(program) and cfg.cwd is not None:
            program = os.path.join(cfg.cwd, program)
        search_path = cfg.env.get("PATH", os.environ.get("PATH", os.defpath))
        found = await anyio.to_thread.run_sync(shutil.which, program, os.X_OK, search_path)
        if found is None:
            return (
                f"its command {cfg.command[0]!r} was not found or is not executable (searched "
                f"PATH). Install it, or fix `command` in the configuration of MCP server "
                f"{self.name!r}"
            )
        return None

    async def _connect_and_serve(self) -> tuple[str, bool]:
        """One connection, from start to loss: returns why it ended and whether it was ready."""
        cfg = self.config
        ended = anyio.Event()
        was_ready = False
        reason = "its connection ended"
        # The connect deadline is a scope around the whole connection, lifted once it is ready:
        # the client's task groups must not be entered inside a shorter-lived scope.
        connecting = anyio.CancelScope(deadline=anyio.current_time() + cfg.connect_timeout_seconds)
        try:
            with connecting:
                async with AsyncExitStack() as stack:
                    client = Client(
                        await self._transport(stack, ended),
                        cache=None,
                        message_handler=self._on_message,
                        client_info=CLIENT_INFO,
                        # A callback is what declares the capability to the server.
                        list_roots_callback=self._list_roots if self.roots else None,
                        sampling_callback=self._sample if self.sampler is not None else None,
                        elicitation_callback=(
                            self._elicit if self.elicitation is not None else None
                        ),
                    )
                    await stack.enter_async_context(client)
                    reason = await self._serve(client, ended, connecting)
        except Exception as exc:
            # The adapter boundary: whatever the server or transport did, it becomes a reason
            # in an alert and a restart, never the end of the toolset.
            reason = _describe_failure(exc)
        finally:
            was_ready = self.client is not None
            self.client = None
        if connecting.cancelled_caught:
            reason = (
                f"it did not start and list its tools within {cfg.connect_timeout_seconds:g} s "
                "(connect_timeout_seconds)"
            )
        return reason, was_ready

    async def _transport(self, stack: AsyncExitStack, ended: anyio.Event) -> Any:
        """The SDK transport for this server, wrapped so that its end is noticed at once."""
        cfg = self.config
        if self.server_object is not None:
            return self.server_object
        if cfg.command is not None:
            self._stderr = await anyio.to_thread.run_sync(_stderr_file)
            stack.callback(self._stderr.close)
            params = StdioServerParameters(
                command=cfg.command[0],
                args=cfg.command[1:],
                # Only what the config names (the SDK adds its few safe defaults, no secrets).
                env=cfg.environment() or None,
                cwd=cfg.cwd,
            )
            return watched(stdio_client(params, errlog=self._stderr), ended)
        assert cfg.url is not None
        http = httpx2.AsyncClient(
            headers=cfg.headers, timeout=httpx2.Timeout(cfg.connect_timeout_seconds, read=300)
        )
        await stack.enter_async_context(http)
        return watched(streamable_http_client(cfg.url, http_client=http), ended)

    async def _serve(
        self, client: Client, ended: anyio.Event, connecting: anyio.CancelScope
    ) -> str:
        """Subscribe to changes, list the tools, then watch the connection until it is lost."""
        lost: list[str] = []
        async with anyio.create_task_group() as tg:

            def give_up(reason: str) -> None:
                if not lost:
                    lost.append(reason)
                tg.cancel_scope.cancel()

            async def watch_transport() -> None:
                await ended.wait()
                give_up(await self._closed_reason())

            tg.start_soon(watch_transport)
            # Subscribed before listing, so that no change falls between the two.
            await tg.start(self._follow_list_changes, client)
            listing = await _list_tools(client)
            connecting.deadline = math.inf
            self.client = client
            self.instructions = client.instructions
            await self._ready(listing)
            tg.start_soon(self._check_health, client, give_up)
            tg.start_soon(self._relist_when_asked, client)
        return lost[0] if lost else "its connection ended"

    async def _check_health(self, client: Client, give_up: Callable[[str], None]) -> None:
        """Every interval (or at once after a call timed out), ask for the tool list: a server
        that does not answer in time is hung. The answer also refreshes the tools."""
        cfg = self.config
        while True:
            with anyio.move_on_after(cfg.health_check_interval_seconds):
                await self._probe_now.wait()
            self._probe_now = anyio.Event()
            try:
                with anyio.fail_after(cfg.health_check_timeout_seconds):
                    listing = await _list_tools(client)
            except TimeoutError:
                give_up(
                    f"it stopped answering: a health check (tools/list) got no answer within "
                    f"{cfg.health_check_timeout_seconds:g} s"
                )
                return
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    give_up(await self._closed_reason())
                    return
                log.warning("MCP server %r answered a health check with %s", self.name, exc)
                continue
            await self._apply_listing(listing)

    async def _follow_list_changes(
        self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """On a 2026-era connection, subscribe to tool-list changes; an older server sends them
        as notifications to `_on_message`, and health checks catch servers that send neither.
        Started once the subscription is acknowledged (or found unsupported)."""
        capability = client.server_capabilities.tools
        modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
        if capability is None or not capability.list_changed or not modern:
            task_status.started()
            return
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                async for _event in subscription:
                    self._relist.set()
        except (SubscriptionLost, ListenNotSupportedError, MCPError, TimeoutError) as exc:
            log.info("MCP server %r: no tool-list subscription (%s)", self.name, exc)
            with suppress(RuntimeError):  # started already, when the stream broke later
                task_status.started()

    async def _relist_when_asked(self, client: Client) -> None:
        while True:
            await self._relist.wait()
            self._relist = anyio.Event()
            try:
                with anyio.fail_after(self.config.health_check_timeout_seconds):
                    listing = await _list_tools(client)
            except (TimeoutError, MCPError):
                self._probe_now.set()  # let the health check decide what that means
                continue
            await self._apply_listing(listing)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._relist.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %r transport reported %r", self.name, message)

    async def _list_roots(self, context: ClientRequestContext) -> mcp_types.ListRootsResult:
        return mcp_types.ListRootsResult(roots=self.roots)

    async def _sample(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        calls = self._calls_of_request()
        return await self._answer_sampling(params, calls[0] if len(calls) == 1 else None)

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        calls = self._calls_of_request()
        if len(calls) <= 1:
            return await self._answer_elicitation(params, calls[0] if calls else None)
        # Several calls of one session: the person is told it is one of them, and their
        # deadlines are all held while they answer; each call's result carries the outcome.
        tools = ", ".join(sorted({c.origin.tool for c in calls}))
        shared = CallOrigin(
            calls[0].origin.session, f"one of {len(calls)} calls in flight ({tools})"
        )
        with ExitStack() as stack:
            for call in calls:
                stack.enter_context(call.progress.held())
            assert self.elicitation is not None  # declared only with it
            answer = await self.elicitation.answer(params, shared)
        for call in calls:
            call.origin.asked.extend(shared.asked)
        return answer

    def _calls_of_request(self) -> list[_CallInFlight]:
        """The calls a server-to-client request (older protocol) may have come during: such a
        request does not say, so it is every call in flight, when they are of one session; none
        when there is none or they belong to several sessions (the request then goes to the
        "main" session, naming no call)."""
        sessions = {c.origin.session for c in self._calls}
        return list(self._calls) if len(sessions) == 1 else []

    async def _answer_elicitation(
        self, params: mcp_types.ElicitRequestParams, call: _CallInFlight | None
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        if self.elicitation is None:  # only reached on a 2026 call: nothing was declared
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=f"MCP server {self.name!r} may not ask this client's user for input",
            )
        if call is None:
            return await self.elicitation.answer(params, None)
        # The person has the approvals' time to answer, not the call's.
        with call.progress.held():
            return await self.elicitation.answer(params, call.origin)

    async def _answer_sampling(
        self, params: mcp_types.CreateMessageRequestParams, call: _CallInFlight | None
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        if self.sampler is None:
            log.warning("MCP server %r asked to sample without allow_sampling", self.name)
            return mcp_types.ErrorData(
                code=mcp_types.INVALID_REQUEST,
                message=(
                    f"MCP server {self.name!r} may not use the runtime's model (MCP sampling): "
                    "the operator has to set allow_sampling = true in its configuration"
                ),
            )
        origin = call.origin if call is not None else None
        return await self.sampler.answer(
            params,
            tool=origin.tool if origin is not None else None,
            session=origin.session if origin is not None else None,
        )

    async def _answer_input(
        self, request: mcp_types.InputRequest, call: _CallInFlight
    ) -> mcp_types.InputResponse | mcp_types.ErrorData | None:
        """This client's answer to what a server asked for during a call (2026-07-28), or None
        for what it cannot give (a person's input when elicitation is not allowed, or roots it
        does not have)."""
        if isinstance(request, mcp_types.CreateMessageRequest):
            return await self._answer_sampling(request.params, call)
        if isinstance(request, mcp_types.ListRootsRequest) and self.roots:
            return mcp_types.ListRootsResult(roots=self.roots)
        if isinstance(request, mcp_types.ElicitRequest) and self.elicitation is not None:
            return await self._answer_elicitation(request.params, call)
        return None

    async def _closed_reason(self) -> str:
        # The server's own output stays out of the alert's text (it is third-party text the
        # model would read); it goes to the log and the alert's context for the operator.
        self.last_stderr = await self._stderr_tail()
        if self.last_stderr:
            log.warning(
                "MCP server %r closed its connection; its last output: %s",
                self.name,
                self.last_stderr,
            )
        return "its connection closed (the process exited or crashed)"

    async def _stderr_tail(self) -> str:
        """The last lines the server process wrote to stderr, if it is a process."""
        file = self._stderr
        if file is None or file.closed:
            return ""
        data = await anyio.to_thread.run_sync(_read_tail, file.fileno())
        lines = [line.strip()[:300] for line in data.splitlines() if line.strip()]
        return " | ".join(lines[-5:])

    # --- state changes ------------------------------------------------------------------------

    async def _ready(self, listing: list[mcp_types.Tool]) -> None:
        previous = self.state
        self.state, self.detail, self.listing = "ready", "", listing
        self.has_listed = True
        # Settled once the toolset has checked the tools (pins, scanners) and offers them.
        await self.owner.rebuild()
        self.settled.set()
        if previous == "unavailable":
            names = ", ".join(t.name for t in listing) or "none"
            await self.owner.alert(
                self.name,
                f"MCP server {self.name!r} is available again after a restart (restart "
                f"{self.restarts}); its tools can be called again: {names}.",
                state="ready",
                restarts=self.restarts,
            )

    async def _lost(self, reason: str, was_ready: bool, delay: float) -> None:
        previous = self.state
        self.state, self.detail = "unavailable", reason
        self.settled.set()
        await self.owner.notify_changed()
        retry = f"It will be restarted in {delay:g} s" if delay else "It is being restarted"
        if was_ready or previous == "connecting":
            what = "stopped working" if was_ready else "could not be started"
            names = ", ".join(t.name for t in self.listing)
            tools = f" Its tools ({names}) are unavailable until then." if names else ""
            await self.owner.alert(
                self.name,
                f"MCP server {self.name!r} {what}: {reason}. {retry}; you will be told when it "
                f"is back.{tools}",
                state="unavailable",
                reason=reason,
                stderr_tail=self.last_stderr,
            )
        else:
            log.info("MCP server %r restart %d failed: %s", self.name, self.restarts, reason)

    async def _fail(self, problem: str) -> None:
        self.state, self.detail = "failed", problem
        self.settled.set()
        await self.owner.notify_changed()
        await self.owner.alert(
            self.name,
            f"MCP server {self.name!r} cannot be started: {problem}. Its tools stay unavailable "
            "until the configuration is fixed and the runtime restarted.",
            state="failed",
            reason=problem,
        )

    async def _apply_listing(self, listing: list[mcp_types.Tool]) -> None:
        if [t.model_dump() for t in listing] != [t.model_dump() for t in self.listing]:
            self.listing = listing
            await self.owner.rebuild()

    # --- calls --------------------------------------------------------------------------------

    def unavailable_message(self, tool: str) -> str:
        if self.state == "failed":
            return (
                f"The tool {tool} is unavailable: MCP server {self.name!r} cannot be started "
                f"({self.detail}). Use another approach; the operator has to fix its configuration."
            )
        why = f" ({self.detail})" if self.detail else ""
        return (
            f"The tool {tool} is unavailable right now: MCP server {self.name!r} is "
            f"{'starting' if self.state == 'connecting' else 'down'}{why}. It is being "
            "restarted and a system.alert will say when it is back; wait for that, or use "
            "another approach."
        )

    async def call(
        self, remote_name: str, tool: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        """Send one tools/call from the calling task, with a deadline that progress extends."""
        client = self.client
        if client is None or self.state != "ready":
            return ToolResult.error(self.unavailable_message(tool))
        cfg = self.config
        started = anyio.current_time()
        hard_deadline = started + cfg.max_call_seconds
        scope = anyio.CancelScope(deadline=min(started + cfg.call_timeout_seconds, hard_deadline))
        progress = _CallProgress(scope, cfg.call_timeout_seconds, hard_deadline, ctx)
        call = _CallInFlight(CallOrigin(ctx.session, tool), progress)
        self._calls.append(call)
        outcome: mcp_types.CallToolResult | ToolResult | None = None
        try:
            if ctx.task is None:
                # `ToolContext.progress` reports nowhere without a task, so progress only
                # extends the deadline: no forwarding task, and no task group whose exit costs
                # a checkpoint.
                with scope:
                    outcome = await self._send(client, remote_name, call, arguments)
            else:
                async with anyio.create_task_group() as tg:
                    progress.task_group = tg
                    with scope:
                        outcome = await self._send(client, remote_name, call, arguments)
        finally:
            self._calls.remove(call)
        result = self._outcome(tool, started, scope, progress, outcome)
        if call.origin.asked:
            note = " ".join(call.origin.asked)
            result = replace(result, content=f"{result.content}\n\n[{note}]")
        return result

    def _outcome(
        self,
        tool: str,
        started: float,
        scope: anyio.CancelScope,
        progress: _CallProgress,
        outcome: mcp_types.CallToolResult | ToolResult | None,
    ) -> ToolResult:
        """The result of a call that ended: a timeout's error, or the server's result."""
        cfg = self.config
        hard_deadline = progress.hard_deadline
        if scope.cancelled_caught:
            self._probe_now.set()  # a server that ignores one call may have stopped answering
            elapsed = anyio.current_time() - started
            if anyio.current_time() >= hard_deadline:
                return ToolResult.error(
                    f"The call to {tool} was stopped after {elapsed:.0f} s, the most MCP server "
                    f"{self.name!r} may take for one call (max_call_seconds = "
                    f"{cfg.max_call_seconds:g}), although it was still reporting progress. The "
                    "server was told to cancel it. Split the work into smaller calls."
                )
            return ToolResult.error(
                f"The call to {tool} timed out: MCP server {self.name!r} sent neither a result "
                f"nor progress for {cfg.call_timeout_seconds:g} s (call_timeout_seconds). The "
                "server was told to cancel it. Try a smaller request, or another approach."
            )
        assert outcome is not None  # set unless the scope was cancelled
        if isinstance(outcome, ToolResult):
            return outcome
        return tool_result_from_mcp(outcome)

    async def _send(
        self, client: Client, remote_name: str, call: _CallInFlight, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult | ToolResult:
        """The server's result, or the error to return for a call that failed."""
        tool, progress = call.origin.tool, call.progress

        async def answer(
            request: mcp_types.InputRequest,
        ) -> mcp_types.InputResponse | mcp_types.ErrorData | None:
            return await self._answer_input(request, call)

        try:
            result = await _call_tool(client, remote_name, arguments, progress, answer)
        except MCPError as exc:
            self._probe_now.set()  # is the server still there? The health check says.
            return self._call_failed(tool, exc)
        except ValidationError as exc:
            return ToolResult.error(
                f"MCP server {self.name!r} answered the call to {tool} with a result that "
                f"does not follow the protocol: {exc.error_count()} problem(s), first: "
                f"{exc.errors()[0]['msg']}. Try again, or use another approach."
            )
        finally:
            progress.finish()
        if isinstance(result, mcp_types.ErrorData):
            return ToolResult.error(
                f"MCP server {self.name!r} asked this client for something during the call to "
                f"{tool}, and it was refused: {result.message}. Use another tool or approach."
            )
        if isinstance(result, mcp_types.InputRequiredResult):
            return needs_input_result(self.name, tool, asked_by_result(result))
        return result

    def _withheld(self) -> str:
        """What this client does not offer the server, and why, as sentences (or "")."""
        withheld = []
        if self.elicitation is None:
            withheld.append(
                "it may not ask the user for input (allow_elicitation = false in its configuration)"
                if not self.config.allow_elicitation
                else "this client has nobody to ask for input (no approvals)"
            )
        if self.sampler is None:
            withheld.append("it may not use the runtime's model (allow_sampling is off)")
        if not withheld:
            return ""
        text = "; ".join(withheld)
        return f"{text[0].upper()}{text[1:]}. "

    def _call_failed(self, tool: str, exc: MCPError) -> ToolResult:
        asked = asked_by_error(exc)
        if asked is not None:
            return needs_input_result(self.name, tool, asked)
        if exc.code == mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY:
            return ToolResult.error(
                f"MCP server {self.name!r} cannot run {tool} for this client: it needs a client "
                f"capability that is not offered to it ({exc.message}). {self._withheld()}Do "
                f"not call {tool} again, with these or other arguments; use another tool or "
                "approach, or tell the user what the server needs."
            )
        if exc.code == CONNECTION_CLOSED:
            return ToolResult.error(
                f"MCP server {self.name!r} closed the connection during the call to {tool}: it "
                "crashed or was stopped, and the call may or may not have taken effect. It is "
                "being restarted; a system.alert will say when it is back."
            )
        return ToolResult.error(
            f"MCP server {self.name!r} rejected the call to {tool} with error {exc.code}: "
            f"{exc.message}. Check the arguments against the tool's schema and call again."
        )


@dataclass
class _CallInFlight:
    """A call being sent: whose it is (for what the server asks during it) and its deadline."""

    origin: CallOrigin
    progress: _CallProgress


AnswerInput = Callable[
    [mcp_types.InputRequest], Awaitable[mcp_types.InputResponse | mcp_types.ErrorData | None]
]


async def _call_tool(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    progress: _CallProgress,
    answer: AnswerInput,
) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult | mcp_types.ErrorData:
    """One tools/call. An input-required result is answered and resent when `answer` can give
    everything it asks for (roots, an allowed model run); one that asks for anything else (a
    person's answer) is handed back rather than answered, since this client has nobody to ask
    (the SDK's own loop would only refuse it, losing what was asked); a refusal is returned as
    its error. One that carries only the server's state asks to be polled, and is."""
    request_state: str | None = None
    responses: mcp_types.InputResponses | None = None
    delay = _POLL_FIRST_DELAY
    result: mcp_types.CallToolResult | mcp_types.InputRequiredResult | None = None
    for _ in range(_POLL_ROUNDS):
        try:
            result = await client.session.call_tool(
                name,
                arguments,
                progress_callback=progress,
                input_responses=responses,
                request_state=request_state,
                allow_input_required=True,
            )
        except MCPError as exc:
            if exc.code != mcp_types.HEADER_MISMATCH:
                raise
            # Our copy of the tool's listing is stale: the SDK's call re-lists it and resends.
            return await client.call_tool(
                name,
                arguments,
                progress_callback=progress,
                input_responses=responses,
                request_state=request_state,
            )
        if not isinstance(result, mcp_types.InputRequiredResult):
            return result
        request_state, responses = result.request_state, None
        if result.input_requests:
            answers: mcp_types.InputResponses = {}
            # Sampling last: what cannot be given (a person's input) must end the call before
            # a model run is spent on a call that cannot finish anyway.
            asked = sorted(
                result.input_requests.items(),
                key=lambda item: isinstance(item[1], mcp_types.CreateMessageRequest),
            )
            for key, request in asked:
                response = await answer(request)
                if response is None:
                    return result
                if isinstance(response, mcp_types.ErrorData):
                    return response
                answers[key] = response
            responses = answers
            continue
        await anyio.sleep(delay)
        delay = min(delay * 2, _POLL_MAX_DELAY)
    assert result is not None
    return result


async def _list_tools(client: Client) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_LISTING_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


class _CallProgress:
    """The progress callback of one call: each report extends the call's deadline (up to its
    hard deadline) and, when `task_group` is set, is passed on to the tool's context.

    The reports reach `ctx` from a task of their own, so that a slow consumer never holds up
    the SDK task that delivers them, and in the order they arrived. Most calls report none: the
    task and its stream are only started by the first report.
    """

    def __init__(
        self, scope: anyio.CancelScope, timeout: float, hard_deadline: float, ctx: ToolContext
    ) -> None:
        self.scope = scope
        self.timeout = timeout
        self.hard_deadline = hard_deadline
        self.ctx = ctx
        self.task_group: TaskGroup | None = None
        self._relay: MemoryObjectSendStream[tuple[float | None, str]] | None = None
        self._done = False
        self._held = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        """No deadline while a person is asked for the server: the time they take is added
        to the hard deadline, and the call's timeout starts afresh when they have answered."""
        began = anyio.current_time()
        self._held += 1
        self.scope.deadline = math.inf
        try:
            yield
        finally:
            self._held -= 1
            self.hard_deadline += anyio.current_time() - began
            if not self._held:
                self.scope.deadline = min(anyio.current_time() + self.timeout, self.hard_deadline)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self._done:
            return  # progress arriving late must not touch the finished call
        if not self._held:
            self.scope.deadline = min(anyio.current_time() + self.timeout, self.hard_deadline)
        if self.task_group is None:
            return
        if self._relay is None:
            self._relay, receive = anyio.create_memory_object_stream[tuple[float | None, str]](
                math.inf
            )
            self.task_group.start_soon(_forward_progress, receive, self.ctx)
        percent = progress / total * 100 if total else None
        text = message or (f"{progress:g} of {total:g}" if total else f"{progress:g}")
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._relay.send_nowait((percent, text))

    def finish(self) -> None:
        """The call has ended: ignore later reports; the relay reports what it holds, then ends."""
        self._done = True
        if self._relay is not None:
            self._relay.close()


async def _forward_progress(
    receive: MemoryObjectReceiveStream[tuple[float | None, str]], ctx: ToolContext
) -> None:
    """Report a call's progress from the calling task, in the order it arrived."""
    with receive:
        async for percent, message in receive:
            await ctx.progress(percent, message)


def _root(path: Path) -> mcp_types.Root:
    return mcp_types.Root.model_validate({"uri": path.resolve().as_uri(), "name": path.name})


def _stderr_file() -> TextIO:
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))


def _read_tail(fd: int) -> str:
    size = os.fstat(fd).st_size
    offset = max(0, size - _STDERR_TAIL_BYTES)
    return os.pread(fd, size - offset, offset).decode("utf-8", errors="replace")


def _describe_failure(exc: BaseException) -> str:
    """A sentence for the first real error inside `exc` (task groups wrap them in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "its connection closed before it was ready (the process exited or crashed)"
        return f"it answered with error {exc.code}: {exc.message}"
    text = str(exc) or "no details"
    return f"{type(exc).__name__}: {text}"
