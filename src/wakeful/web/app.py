"""The web console: a starlette app over a running :class:`~wakeful.runtime.Runtime`.

One page (`/`) whose script renders JSON from the API with `textContent` only, so nothing the
agent, a tool or a web page wrote can become markup in the console; a server-sent event stream
(`/events`) pushes the agent's messages as they are sent. Every request passes
:class:`~wakeful.web.auth.ConsoleAuth` first (token; Origin, Host and CSRF token on changes).

Changes go where the terminal console sends them: the user's text to `runtime.submit` (the
session's router decides to cancel, queue or run it in parallel), Stop as a `user.interrupt`,
answers to `runtime.approvals`, cancellations to the task manager and the timer service.

The console is the "console" channel to the rest of the runtime: what the page shows is marked
read there (`Outbox.mark_read_through`, so the delivery policy cancels escalations and IM copies
show it), and the page tells `runtime.activity` the user is here (`POST /api/presence`, at most
every 30 s: on load, when the page comes to the front, while typing). A message read elsewhere
(an IM reply) reaches open pages through the outbox's read listeners.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from ..core.records import OutboundMessage, iso_utc
from ..errors import UserError
from ..events import USER_ACTION, Event, Source, user_input, user_interrupt
from ..messages import AssistantMessage, Message, ToolMessage, UserMessage
from .attachments import AttachmentRefused, AttachmentResponse, open_attachment
from .auth import SECURITY_HEADERS, ConsoleAuth
from .events import EventStreamResponse, LiveFeed
from .page import page_html, static_file

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime

__all__ = ["WebConsole", "serve_console"]

_MAX_TEXT = 100_000
MAX_BODY_BYTES = 1_000_000
PAGE_SIZE = 200  # messages a page opens with, and loads with each "Load earlier messages"
MAX_PAGE_SIZE = 1000
CONSOLE_CHANNEL = "console"  # what the delivery policy and read state call the consoles


class WebConsole:
    """The console's state (its auth and live feed) and its starlette app (`.app`)."""

    def __init__(self, runtime: Runtime, auth: ConsoleAuth, *, session: str = "main") -> None:
        self.runtime = runtime
        self.auth = auth
        self.session = session
        self.feed = LiveFeed()
        # Like the terminal console, it listens to the outbox (new messages, and messages read
        # anywhere); `close` stops listening.
        runtime.outbox.listeners.append(self.feed.on_outbox_message)
        runtime.outbox.read_listeners.append(self.feed.on_read)
        runtime.outbox.delivery_listeners.append(self.on_deliveries)
        routes = [
            Route("/", self.index),
            Route("/static/console.js", self.script),
            Route("/static/console.css", self.style),
            Route("/events", self.events),
            Route("/api/messages", self.messages),
            Route("/api/messages/{message_id}", self.message),
            Route("/api/attachments/{message_id}/{index}", self.attachment),
            Route("/api/state", self.state),
            Route("/api/trajectory", self.trajectory),
            Route("/api/send", self.send, methods=["POST"]),
            Route("/api/read", self.mark_read, methods=["POST"]),
            Route("/api/presence", self.presence, methods=["POST"]),
            Route("/api/stop", self.stop, methods=["POST"]),
            Route("/api/approvals/{request_id}", self.answer_approval, methods=["POST"]),
            Route("/api/inputs/{request_id}", self.answer_input, methods=["POST"]),
            Route("/api/tasks/{task_id}/cancel", self.cancel_task, methods=["POST"]),
            Route("/api/timers/{timer_id}/cancel", self.cancel_timer, methods=["POST"]),
            Route("/api/action", self.card_action, methods=["POST"]),
        ]
        self.app = Starlette(routes=routes)
        self.app.add_middleware(_Guard, console=self)

    def close(self) -> None:
        """Stop listening to the runtime's outbox (open pages get nothing more)."""
        outbox = self.runtime.outbox
        if self.feed.on_outbox_message in outbox.listeners:
            outbox.listeners.remove(self.feed.on_outbox_message)
        if self.feed.on_read in outbox.read_listeners:
            outbox.read_listeners.remove(self.feed.on_read)
        if self.on_deliveries in outbox.delivery_listeners:
            outbox.delivery_listeners.remove(self.on_deliveries)

    async def on_deliveries(self, message: OutboundMessage) -> None:
        """An outbox delivery listener: where a message went changed (sent, failed, read, an
        escalation reached another channel); open pages show it at once."""
        entry = _entry(message)
        self.feed.publish(
            {
                "type": "deliveries",
                "id": message.id,
                "session": message.session,
                "deliveries": entry["deliveries"],
            }
        )

    # --- pages --------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        if "token" in request.query_params:
            # Login: the cookie, then the same page without the token in the address bar.
            response = RedirectResponse("/", status_code=303)
            self.auth.login(request, response)
            return response
        return HTMLResponse(page_html(self.auth.csrf_token, self.session))

    async def script(self, request: Request) -> Response:
        return Response(static_file("console.js"), media_type="text/javascript")

    async def style(self, request: Request) -> Response:
        return Response(static_file("console.css"), media_type="text/css")

    async def events(self, request: Request) -> Response:
        session = request.query_params.get("session", self.session)
        return EventStreamResponse(self.feed.subscribe(session))

    # --- reading ------------------------------------------------------------------------------

    async def messages(self, request: Request) -> Response:
        """One page of the session's chat, oldest first: up to `limit` of the agent's messages
        from the outbox's repository (with their read state and deliveries), and the user's
        lines typed here during this run between them. `before=<msg id>` pages back from that
        message; `earlier` in the answer is the id to page back from next (null: no more)."""
        session = request.query_params.get("session", self.session)
        limit = request.query_params.get("limit", str(PAGE_SIZE))
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE_SIZE:
            return _bad(
                f"limit={limit!r} is not a number of messages from 1 to {MAX_PAGE_SIZE}; "
                f"e.g. limit={PAGE_SIZE}."
            )
        repository = self.runtime.outbox.messages
        before, newer_than = request.query_params.get("before"), None
        if before is not None:
            anchor = await repository.get(before)
            if anchor is None or anchor.session != session:
                return _missing(
                    f"No message {before!r} of session {session!r} is stored; page back from "
                    "the `earlier` id the previous answer of /api/messages gave."
                )
            newer_than = anchor.created_at
        stored = await repository.list(session, limit=int(limit) + 1, before=before)
        earlier = stored[int(limit) - 1].id if len(stored) > int(limit) else None
        stored = stored[: int(limit)]
        # The user's lines from the oldest message shown (all older ones on the last page).
        older_than = stored[-1].created_at if earlier is not None else None
        typed = [
            line
            for line in self.feed.history
            if line.get("session") == session
            and (older_than is None or str(line["created_at"]) >= older_than)
            and (newer_than is None or str(line["created_at"]) < newer_than)
        ]
        chat = sorted([_entry(m) for m in stored] + typed, key=lambda m: str(m["created_at"]))
        return JSONResponse({"messages": chat, "earlier": earlier})

    async def message(self, request: Request) -> Response:
        """One of the agent's messages as the chat shows it: its read state and deliveries now
        (the page refreshes a message's deliveries with it)."""
        message_id = request.path_params["message_id"]
        found = await self.runtime.outbox.messages.get(message_id)
        if found is None:
            return _missing(f"No message {message_id!r} is stored.")
        return JSONResponse(_entry(found))

    async def attachment(self, request: Request) -> Response:
        """The file of a stored message's attachment (see :mod:`.attachments`): a download, or
        an image shown inline."""
        message_id, index = request.path_params["message_id"], request.path_params["index"]
        found = await self.runtime.outbox.messages.get(message_id)
        if found is None:
            return _missing(
                f"No message {message_id!r} is stored; the console serves only files that a "
                "stored message lists."
            )
        count = len(found.attachments)
        if not index.isdigit() or int(index) >= count:
            which = f"give 0 to {count - 1}" if count else "it has none"
            return _missing(
                f"Message {message_id} has {count} attachment(s); {index!r} is not one of them "
                f"({which})."
            )
        workspace = self.runtime.settings.workdir or Path.cwd()
        what = f"attachment {index} of message {message_id}"
        try:
            opened = await anyio.to_thread.run_sync(
                lambda: open_attachment(workspace, found.attachments[int(index)], what=what)
            )
        except AttachmentRefused as exc:
            return JSONResponse({"error": exc.text}, status_code=exc.status)
        return AttachmentResponse(opened)

    async def state(self, request: Request) -> Response:
        session = request.query_params.get("session", self.session)
        rt = self.runtime
        approvals = rt.approvals
        waiting = approvals.pending(session) if approvals is not None else []
        inputs = approvals.pending_inputs(session) if approvals is not None else []
        timers = rt.timers.list_timers(session) if rt.timers is not None else []
        tasks = [
            t for t in rt.tasks.list(session, background_only=False) if t.background or not t.done
        ]
        return JSONResponse(
            {
                "approvals": [
                    {"id": r.id, "tool": r.tool, "summary": r.summary, "reasons": list(r.reasons)}
                    for r in waiting
                ],
                "inputs": [
                    {"id": r.id, "question": r.question(), "has_form": r.form is not None}
                    for r in inputs
                ],
                "tasks": [
                    {
                        "id": t.id,
                        "tool": t.tool,
                        "description": t.description,
                        "state": t.state,
                        "percent": t.percent,
                        "progress": t.progress_message,
                        "background": t.background,
                        "seconds": round(t.runtime_seconds, 1),
                    }
                    for t in tasks
                ],
                "timers": [
                    {
                        "id": t.id,
                        "note": t.note,
                        "kind": t.kind,
                        "next_fire": t.next_fire.isoformat() if t.next_fire else None,
                    }
                    for t in timers
                ],
                "channels": {
                    name: {"state": h.state, "detail": h.detail} for name, h in rt.channels.items()
                },
                "audit": await self._audit_stats(),
                "unread": await rt.outbox.messages.unread_count(session),
            }
        )

    async def _audit_stats(self) -> dict[str, Any]:
        """Per tool, the audited calls' figures, from the store's audit log on either backend
        (empty before the runtime has a store)."""
        store = self.runtime.store
        if store is None:
            return {}
        from ..safety.audit import store_stats

        return {row.tool: row.to_json() for row in await store_stats(store)}

    async def trajectory(self, request: Request) -> Response:
        session = self.runtime.sessions.get(request.query_params.get("session", self.session))
        messages = session.trajectory.messages if session is not None else []
        return JSONResponse([_shown(m) for m in messages])

    # --- changes ------------------------------------------------------------------------------

    async def send(self, request: Request) -> Response:
        body = await _json_body(request)
        text, session = body.get("text"), str(body.get("session") or self.session)
        if not isinstance(text, str) or not text.strip():
            return _bad('Send {"text": "..."} with the message to the agent.')
        if len(text) > _MAX_TEXT:
            return _bad(f"The message is {len(text)} characters; the limit is {_MAX_TEXT}.")
        entry = {"type": "message", "role": "user", "session": session, "text": text}
        self.feed.publish(entry | {"created_at": iso_utc(datetime.now(UTC))}, keep=True)
        decision = await self.runtime.submit(user_input(text, session=session, channel="web"))
        return JSONResponse({"routed": str(getattr(decision, "action", decision))})

    async def mark_read(self, request: Request) -> Response:
        """The person saw the chat down to message `through`: those messages are read, on every
        channel (one read state per message). The outbox tells its read listeners: the
        delivery policy, IM copies, and every open console page (see `LiveFeed.on_read`)."""
        body = await _json_body(request)
        through, session = body.get("through"), str(body.get("session") or self.session)
        if not isinstance(through, str) or not through:
            return _bad('Send {"through": "msg_…"}: the last message the person has seen.')
        outbox = self.runtime.outbox
        found = await outbox.messages.get(through)
        if found is None or found.session != session:
            return _missing(f"No message {through!r} of session {session!r} is stored.")
        newly = await outbox.mark_read_through(session, through, channel=CONSOLE_CHANNEL)
        unread = await outbox.messages.unread_count(session)
        return JSONResponse({"read": newly, "unread": unread})

    async def presence(self, request: Request) -> Response:
        """The person is at the page (it loaded, came to the front, or they type): the runtime
        counts them present on the console, so the delivery policy need not reach further."""
        self.runtime.activity.touch(CONSOLE_CHANNEL)
        return JSONResponse({"present": True})

    async def stop(self, request: Request) -> Response:
        body = await _json_body(request)
        session = str(body.get("session") or self.session)
        reason = str(body.get("reason") or "stop")
        await self.runtime.submit(user_interrupt(reason, session=session, channel="web"))
        return JSONResponse({"stopped": True})

    async def answer_approval(self, request: Request) -> Response:
        body = await _json_body(request)
        approvals = self.runtime.approvals
        request_id = request.path_params["request_id"].lower()
        approve = body.get("approve") is True
        reason = str(body.get("reason") or "")
        if approvals is None or not approvals.resolve(request_id, approve, reason):
            return _missing(f"No call is waiting for approval with id {request_id}.")
        return JSONResponse({"answered": request_id, "approved": approve})

    async def answer_input(self, request: Request) -> Response:
        body = await _json_body(request)
        approvals = self.runtime.approvals
        request_id = request.path_params["request_id"].lower()
        if approvals is None:
            return _missing(f"No request for input is waiting with id {request_id}.")
        if body.get("decline") is True:
            if not approvals.decline_input(request_id, str(body.get("reason") or "")):
                return _missing(f"No request for input is waiting with id {request_id}.")
            return JSONResponse({"declined": request_id})
        answer = body.get("answer", "")
        if not isinstance(answer, str | dict):
            return _bad('Send {"answer": "field=value …"} or {"decline": true}.')
        reply = approvals.answer_input(request_id, answer)
        return JSONResponse({"accepted": reply.accepted, "text": reply.text})

    async def cancel_task(self, request: Request) -> Response:
        task = self.runtime.tasks.get(request.path_params["task_id"])
        if task is None or task.done:
            return _missing(f"No running task has id {request.path_params['task_id']}.")
        task.cancel("cancelled by the user in the web console")
        return JSONResponse({"cancelled": task.id})

    async def cancel_timer(self, request: Request) -> Response:
        timers = self.runtime.timers
        timer_id = request.path_params["timer_id"]
        if timers is None:
            return _missing(f"No active timer has id {timer_id}.")
        try:
            await timers.cancel_timer(timer_id)
        except UserError as exc:
            return _missing(str(exc))
        return JSONResponse({"cancelled": timer_id})

    async def card_action(self, request: Request) -> Response:
        body = await _json_body(request)
        ids = {key: body.get(key) for key in ("card_id", "action_id", "message_id")}
        if not all(isinstance(v, str) and v for v in (ids["card_id"], ids["action_id"])):
            return _bad('Send {"card_id", "action_id", "message_id"} of the button pressed.')
        event = Event(
            kind=USER_ACTION,
            source=Source(type="user", id="user"),
            channel="web",
            content={k: v for k, v in ids.items() if isinstance(v, str)},
            session=str(body.get("session") or self.session),
        )
        await self.runtime.submit(event)
        return JSONResponse({"submitted": event.id})


class _Guard:
    """ASGI middleware: every HTTP request passes the console's auth (read per request: it
    learns its port once bound); every response gets the security headers."""

    def __init__(self, app: Any, *, console: WebConsole) -> None:
        self.app = app
        self.console = console

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # the console has none; nothing passes unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request, auth = Request(scope), self.console.auth
        if scope["path"] == "/" and request.method == "GET" and "token" in request.query_params:
            refusal = auth.login_refusal(request)
        else:
            refusal = auth.refusal(request)
        size = request.headers.get("content-length", "0")
        if refusal is None and (not size.isdigit() or int(size) > MAX_BODY_BYTES):
            refusal = JSONResponse(
                {"error": f"A request body may hold at most {MAX_BODY_BYTES:,} bytes."},
                status_code=413,
            )
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _entry(message: OutboundMessage) -> dict[str, Any]:
    """A stored message to the user as the page's chat entry."""
    return {
        "type": "message",
        "role": "agent",
        "id": message.id,
        "session": message.session,
        "created_at": message.created_at,
        "text": message.text,
        "urgency": message.urgency,
        "kind": message.kind,
        "card": message.card,
        "title": message.title,
        "attachments": [
            {"name": item.name, "size": item.size, "type": item.type}
            for item in message.attachments
        ],
        "read": message.read,
        "read_on": message.read_on,
        "deliveries": [
            {
                "channel": d.channel,
                "state": d.state,
                "error": d.error,
                "updated_at": d.updated_at,
            }
            for d in message.deliveries
        ],
    }


def _shown(message: Message) -> dict[str, Any]:
    """One trajectory message for the page: role, text, tool calls, status and mark."""
    shown: dict[str, Any] = {"role": message.role, "text": getattr(message, "content", "")}
    if isinstance(message, AssistantMessage):
        shown["tool_calls"] = [
            {"name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    elif isinstance(message, ToolMessage):
        shown |= {"name": message.name, "status": message.status}
    elif isinstance(message, UserMessage) and message.mark is not None:
        shown["mark"] = message.mark
    return shown


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _bad(text: str) -> Response:
    return JSONResponse({"error": text}, status_code=400)


def _missing(text: str) -> Response:
    return JSONResponse({"error": text}, status_code=404)


async def serve_console(
    console: WebConsole,
    host: str,
    port: int,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the console with uvicorn in this event loop until cancelled; `task_status` gets
    the port it listens on. With port 0 (any free port), the console's auth is told the port
    chosen, so its Host and Origin checks name it. An address that cannot be bound raises
    UserError naming it."""
    import uvicorn

    listener = _listen(host, port)
    bound = int(listener.getsockname()[1])
    if port == 0:
        console.auth = console.auth.at_port(host, bound)
    config = uvicorn.Config(
        console.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    stopped = anyio.Event()

    async def run() -> None:
        # Shielded: on cancellation the server is asked to exit and closes its socket and
        # connections itself, rather than being cut off mid-way.
        try:
            with anyio.CancelScope(shield=True):
                await server.serve(sockets=[listener])
        finally:
            listener.close()
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        task_status.started(bound)
        try:
            await anyio.sleep_forever()
        finally:
            server.should_exit = True
            console.close()
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await stopped.wait()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and the connections accepted inherit it. Without it, Nagle's algorithm holds a response's
    # body (written after its headers) until the browser's delayed ACK: 40 ms per request.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise UserError(
            f"The web console cannot listen on {host}:{port}: {exc.strerror or exc}. Choose "
            "another address with --web HOST:PORT (e.g. --web 127.0.0.1:8788)."
        ) from exc
    listener.listen(128)
    listener.setblocking(False)
    return listener
