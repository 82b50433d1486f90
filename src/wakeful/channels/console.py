"""The console channel: a terminal chat where the user can type at any time.

Lines typed while the agent works are events like any other, routed by the session: `/stop`
sends a user.interrupt, `/tasks` lists background tasks, `/quit` ends the chat. Messages the agent
sends with reply_to_user are printed as they arrive; tool calls and results are shown dimmed so
the user can follow what the agent does.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import anyio
from rich.console import Console
from rich.markup import escape

from ..events import user_input, user_interrupt
from ..messages import AssistantMessage, Message, ToolMessage
from ..models.base import StreamPart
from ..runtime import Runtime

HELP = "Type a message and press Enter. /stop interrupts, /tasks lists tasks, /quit leaves."


class ConsoleObserver:
    """Shows the agent's tool calls and results as they are recorded."""

    def __init__(self, console: Console, *, verbose: bool = True) -> None:
        self.console = console
        self.verbose = verbose

    def on_message(self, session: str, message: Message) -> None:
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

    def on_stream_part(self, session: str, part: StreamPart) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        if self.verbose:
            self.console.print(
                f"[dim yellow]  (model turn discarded: {escape(reason)})[/dim yellow]"
            )


class ConsoleChannel:
    """Reads the user's lines from a text stream and prints what the agent sends."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        session: str = "main",
        stream: TextIO | None = None,
        console: Console | None = None,
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.stream = stream or sys.stdin
        self.console = console or Console()
        runtime.outbox.listeners.append(self.show)

    async def show(self, message: dict[str, Any]) -> None:
        if message["session"] != self.session:
            return
        label = "wakeful (in parallel)" if message.get("parallel") else "wakeful"
        style = "bold red" if message.get("urgency") == "high" else "bold green"
        self.console.print(f"[{style}]{label}>[/{style}] {escape(str(message['text']))}")

    async def run(self) -> None:
        """Read lines until /quit or end of input; then wait for the agent to finish."""
        interactive = self.stream.isatty()
        if interactive:
            self.console.print(f"[dim]{HELP}[/dim]")
        while True:
            line = await anyio.to_thread.run_sync(self.stream.readline, abandon_on_cancel=True)
            if not line:
                break
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            command = text.strip()
            if command == "/quit":
                return
            if command == "/help":
                self.console.print(f"[dim]{HELP}[/dim]")
            elif command == "/tasks":
                self.show_tasks()
            elif command.startswith("/stop"):
                reason = command[len("/stop") :].strip() or "stop"
                await self.runtime.submit(user_interrupt(reason, session=self.session))
            else:
                await self.runtime.submit(user_input(text, session=self.session))
        # End of input (a pipe): let the agent finish what it was asked.
        await self.runtime.wait_idle()

    def show_tasks(self) -> None:
        tasks = self.runtime.tasks.list(self.session)
        if not tasks:
            self.console.print("[dim]No background tasks.[/dim]")
        for t in tasks:
            percent = f" {t.percent:.0f}%" if t.percent is not None else ""
            self.console.print(
                f"[dim]{t.id} {t.state}{percent} {escape(t.tool)} {escape(t.description)}[/dim]"
            )
