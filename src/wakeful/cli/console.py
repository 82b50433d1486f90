"""Where every `wakeful` command prints: its output, its errors, and how it fails."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `message` as an error and return the exit to raise: `raise fail("…")`."""
    err.print(f"[bold red]error:[/bold red] {escape(message)}")
    return typer.Exit(code)
