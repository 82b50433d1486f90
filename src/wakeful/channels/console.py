"""The console channel: a terminal chat where the user can type at any time.

Lines typed while the agent works are events like any other, routed by the session: `/stop`
sends a user.interrupt, `/tasks` lists the session's tasks, `/quit` ends the chat. A line of the
form `/word` that is no command is refused with a hint rather than sent, so a mistyped command
never reaches the agent as text; `//` at the start of a line sends the rest (with one `/`) as
text. Messages the agent sends with reply_to_user are printed as they arrive; tool calls and
results are shown dimmed so the user can follow what the agent does.

Text the model writes without calling reply_to_user is not a message to the user (unless the
agent's `send_assistant_text` is on), but it is never hidden either: a turn that ends in plain
text (small local models often answer that way) is printed, marked as not sent, so the chat never
goes silent without a hint.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, Final, Protocol, TextIO

import anyio
from anyio.abc import TaskStatus
from rich.console import Console
from rich.markup import escape

from ..core.channel import ChannelHealth
from ..events import Event, user_input, user_interrupt
from ..messages import AssistantMessage, Message, ToolMessage
from ..models.base import StreamPart

if TYPE_CHECKING:
    from ..safety.approvals import Approvals
    from ..services import Outbox
    from ..tools.tasks import TaskManager

HELP = (
    "Type a message and press Enter. /stop [reason] interrupts, /tasks lists tasks, "
    "/approvals lists what waits for you, /approve ID or /deny ID (and why) answers a call, "
    "/answer ID field=value … or /decline ID answers a server's request for input, /help "
    "shows this, /quit leaves. Start a line with // to send text that begins with /."
)

# A command is a slash and a word, alone or followed by a space and arguments. Other lines that
# start with a slash ("/etc/hosts is empty?") are ordinary text.
_COMMAND: Final = re.compile(r"/([A-Za-z][\w-]*)(?:\s+(.*))?", re.DOTALL)
COMMANDS: Final = (
    "help",
    "quit",
    "stop",
    "tasks",
    "approvals",
    "approve",
    "deny",
    "answer",
    "decline",
)


UNSENT_LABEL: Final = "wakeful (plain text, not sent with reply_to_user)>"
"""How the console marks text the model wrote without sending it to the user."""


class ConsoleRuntime(Protocol):
    """What the console channel needs from a runtime: where replies go, where typed lines go,
    and the session's tasks and approvals. :class:`wakeful.runtime.Runtime` is one."""

    @property
    def outbox(self) -> Outbox: ...

    @property
    def tasks(self) -> TaskManager: ...

    @property
    def approvals(self) -> Approvals | None: ...

    async def submit(self, event: Event, /) -> object: ...

    async def wait_idle(self) -> None: ...


# How often the console, at the end of piped input, looks whether the requests to people are
# all answered.
AWAIT_ANSWERS_POLL_SECONDS = 0.1


class ConsoleObserver:
    """Shows the agent's tool calls and results as they are recorded, and the text it wrote
    without sending it.

    `assistant_text_sent` mirrors the agent's `send_assistant_text`: when it is on, the runtime
    sends a final plain-text turn through the outbox, so the channel prints it and this observer
    does not. When it is off, a turn that ends in plain text is printed here, marked with
    :data:`UNSENT_LABEL`, even with `verbose=False`: otherwise the user would see nothing at all.
    Text that comes with tool calls is shown dimmed, with the calls, when `verbose`.
    """

    def __init__(
        self, console: Console, *, verbose: bool = True, assistant_text_sent: bool = False
    ) -> None:
        self.console = console
        self.verbose = verbose
        self.assistant_text_sent = assistant_text_sent

    def on_message(self, session: str, message: Message) -> None:
        if isinstance(message, AssistantMessage):
            self._show_text(message)
        if not self.verbose:
            return
        if isinstance(message, AssistantMessage):
            for c in message.tool_calls:
                if c.name != "reply_to_user":
                    args = c.arguments if len(c.arguments) <= 120 else c.arguments[:119] + "…"
                    self.console.print(f"[dim]  → {escape(c.name)} {escape(args)}[/dim]")
        elif isinstance(message, ToolMessage) and message.name != "reply_to_user":
            first = message.content.strip().splitlines()[0] if message.content.strip() else ""
            first = first if len(first) <= 120 else first[:119] + "…"
            self.console.print(
                f"[dim]  ← {escape(message.name)} [{message.status}] {escape(first)}[/dim]"
            )

    def _show_text(self, message: AssistantMessage) -> None:
        text = message.content.strip()
        if not text or self.assistant_text_sent:
            return
        if not message.tool_calls:
            self.console.print(f"[bold yellow]{UNSENT_LABEL}[/bold yellow] {escape(text)}")
        elif self.verbose:
            self.console.print(f"[dim]  {escape(text)}[/dim]")

    def on_stream_part(self, session: str, part: StreamPart) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        # A failed request is told to the user by the session itself.
        if self.verbose and not reason.startswith("model error"):
            self.console.print(
                f"[dim yellow]  (model turn discarded: {escape(reason)})[/dim yellow]"
            )


class ConsoleChannel:
    """Reads the user's lines from a text stream and prints what the agent sends.

    It needs only a :class:`ConsoleRuntime` (where replies go, where typed lines go, the
    session's tasks and approvals), not the whole runtime.
    """

    def __init__(
        self,
        runtime: ConsoleRuntime,
        *,
        session: str = "main",
        stream: TextIO | None = None,
        console: Console | None = None,
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.stream = stream or sys.stdin
        self.console = console or Console()
        self._reading = False
        runtime.outbox.listeners.append(self.show)

    async def show(self, message: dict[str, Any]) -> None:
        if message["session"] != self.session:
            return
        label = "wakeful (in parallel)" if message.get("parallel") else "wakeful"
        if message.get("kind") == "notification":
            label = (
                f"wakeful (notice{': ' + str(message['title']) if message.get('title') else ''})"
            )
        style = "bold red" if message.get("urgency") in ("high", "urgent") else "bold green"
        # A card's text is already its plain-text rendering (title, fields, list, buttons).
        self.console.print(f"[{style}]{label}>[/{style}] {escape(str(message['text']))}")
        for item in message.get("attachments") or ():
            self.console.print(
                f"[dim]  attached: {escape(str(item['name']))} ({item['size']:,} bytes, "
                f"{escape(str(item['type']))}) at {escape(str(item['path']))}[/dim]"
            )
        if "id" in message:
            # Printed in the user's terminal is read: the message is read on every channel.
            await self.runtime.outbox.mark_read([message["id"]], channel=self.name)

    name = "console"

    def health(self) -> ChannelHealth:
        """Running while it reads the user's lines; stopped before and after."""
        if self._reading:
            return ChannelHealth("running")
        return ChannelHealth("stopped", "not reading input")

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read lines until /quit or end of input; then wait for the agent to finish."""
        self._reading = True
        try:
            task_status.started()
            await self._read_lines()
        finally:
            self._reading = False

    async def _read_lines(self) -> None:
        interactive = self.stream.isatty()
        if interactive:
            self.console.print(f"[dim]{escape(HELP)}[/dim]")
        while True:
            line = await anyio.to_thread.run_sync(self.stream.readline, abandon_on_cancel=True)
            if not line:
                break
            if not await self.handle_line(line.rstrip("\r\n")):
                return
        # End of input (a pipe): let the agent finish what it was asked, including acting on the
        # answers to the requests it sent people without waiting (each arrives by its deadline
        # at the latest, as the default), as it finishes its background tasks.
        await self.runtime.wait_idle()
        approvals = self.runtime.approvals
        while approvals is not None and approvals.awaiting():
            await anyio.sleep(AWAIT_ANSWERS_POLL_SECONDS)
            await self.runtime.wait_idle()

    async def handle_line(self, text: str) -> bool:
        """Act on one typed line; False once the user asked to leave."""
        stripped = text.strip()
        if not stripped:
            return True
        if stripped.startswith("//"):
            await self.runtime.submit(user_input(stripped[1:], session=self.session))
            return True
        command = _COMMAND.fullmatch(stripped)
        if command is None:
            await self.runtime.submit(user_input(text, session=self.session))
            return True
        typed, argument = command.group(1), (command.group(2) or "").strip()
        name = typed.lower()
        if name == "quit":
            return False
        if name == "help":
            self.console.print(f"[dim]{escape(HELP)}[/dim]")
        elif name == "tasks":
            self.show_tasks()
        elif name == "stop":
            await self.runtime.submit(user_interrupt(argument or "stop", session=self.session))
        elif name == "approvals":
            self.show_approvals()
        elif name in ("approve", "deny"):
            self.answer_approval(name == "approve", argument)
        elif name == "answer":
            self.answer_input(argument)
        elif name == "decline":
            self.decline_input(argument)
        else:
            self.console.print(
                f"[yellow]Unknown command /{escape(typed)}; /help lists the commands "
                f"({', '.join('/' + c for c in COMMANDS)}). To send it as text, start the line "
                "with //.[/yellow]"
            )
        return True

    def show_approvals(self) -> None:
        """The calls of this session waiting for the user's yes or no, and the servers' requests
        for input waiting for an answer."""
        approvals = self.runtime.approvals
        waiting = approvals.pending(self.session) if approvals is not None else []
        inputs = approvals.pending_inputs(self.session) if approvals is not None else []
        if not waiting and not inputs:
            self.console.print("[dim]No call is waiting for your approval.[/dim]")
        for request in waiting:
            why = " ".join(request.reasons)
            self.console.print(
                f"[yellow]{request.id}[/yellow] {escape(request.tool)} {escape(request.summary)}"
                f" [dim]— {escape(why)}[/dim]"
            )
        for asked in inputs:
            self.console.print(f"[yellow]{asked.id}[/yellow] {escape(asked.question())}")

    def answer_input(self, argument: str) -> None:
        """`/answer ID field=value …`: answer a server's request for input. A bad answer is
        explained, and the request stays open."""
        request_id, _, values = argument.partition(" ")
        approvals = self.runtime.approvals
        if not request_id:
            self.console.print(
                "[yellow]Give the id: /answer ID field=value … (see /approvals).[/yellow]"
            )
            return
        if approvals is None:
            self.console.print(
                f"[yellow]No request is waiting with id {escape(request_id)}.[/yellow]"
            )
            return
        reply = approvals.answer_input(request_id, values)
        style = "dim" if reply.accepted else "yellow"
        self.console.print(f"[{style}]{escape(reply.text)}[/{style}]")

    def decline_input(self, argument: str) -> None:
        """`/decline ID [why]`: decline a server's request for input."""
        request_id, _, why = argument.partition(" ")
        approvals = self.runtime.approvals
        if not request_id:
            self.console.print("[yellow]Give the id: /decline ID (see /approvals).[/yellow]")
        elif approvals is None or not approvals.decline_input(request_id, why.strip()):
            self.console.print(
                f"[yellow]No request for input is waiting with id {escape(request_id)}; "
                "/approvals lists those that are.[/yellow]"
            )
        else:
            self.console.print(f"[dim]Declined {escape(request_id)}.[/dim]")

    def answer_approval(self, approve: bool, argument: str) -> None:
        """`/approve ID [why]` or `/deny ID [why]`: answer one waiting call."""
        verb = "approve" if approve else "deny"
        request_id, _, why = argument.partition(" ")
        approvals = self.runtime.approvals
        if not request_id:
            self.console.print(f"[yellow]Give the id: /{verb} ID (see /approvals).[/yellow]")
        elif approvals is None or not approvals.resolve(request_id.lower(), approve, why.strip()):
            self.console.print(
                f"[yellow]No call is waiting with id {escape(request_id)}; /approvals lists "
                "those that are.[/yellow]"
            )
        else:
            done = "Approved" if approve else "Denied"
            self.console.print(f"[dim]{done} {escape(request_id)}.[/dim]")

    def show_tasks(self) -> None:
        """The session's background tasks (finished ones too) and the calls still running."""
        tasks = [
            t
            for t in self.runtime.tasks.list(self.session, background_only=False)
            if t.background or not t.done
        ]
        if not tasks:
            self.console.print("[dim]No tasks.[/dim]")
        for t in tasks:
            percent = f" {t.percent:.0f}%" if t.percent is not None else ""
            where = "" if t.background else " (inline)"
            self.console.print(
                f"[dim]{t.id} {t.state}{percent}{where} {escape(t.tool)} "
                f"{escape(t.description)} ({t.runtime_seconds:.1f}s)[/dim]"
            )
