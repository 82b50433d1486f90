"""Prints a trajectory as it grows, for `wakeful demo async`."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ..models.base import StreamPart

_STATUS_STYLE = {
    "ok": "green",
    "error": "red",
    "placeholder": "yellow",
    "cancelled": "red",
    "lost": "red",
}


def _short(text: str, limit: int = 160) -> str:
    text = text.replace("\n", " ⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TrajectoryPrinter:
    """A session observer that prints each recorded message on one line."""

    def __init__(self, console: Console, *, title: str) -> None:
        self.console = console
        console.rule(f"[bold]{escape(title)}")

    def on_message(self, session: str, message: Message) -> None:
        c = self.console
        if isinstance(message, SystemMessage):
            c.print(f"[dim]system  {escape(_short(message.content))}[/dim]")
        elif isinstance(message, UserMessage):
            c.print(f"[bold cyan]user[/bold cyan]    {escape(_short(message.content, 400))}")
        elif isinstance(message, AssistantMessage):
            if message.content:
                c.print(f"[bold]assistant[/bold] {escape(_short(message.content))}")
            for call in message.tool_calls:
                c.print(
                    f"[bold]assistant[/bold] → {escape(call.name)}"
                    f"({escape(_short(call.arguments))})"
                )
        elif isinstance(message, ToolMessage):
            style = _STATUS_STYLE[message.status]
            c.print(
                f"[{style}]tool[/{style}]    ← {escape(message.name)} [{message.status}] "
                f"{escape(_short(message.content))}"
            )

    def on_stream_part(self, session: str, part: StreamPart) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        self.console.print(
            f"[yellow]        (half-streamed turn discarded: {escape(reason)})[/yellow]"
        )
