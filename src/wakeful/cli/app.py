"""The `wakeful` command line: the Typer application, and the one list of modules that add
their commands to it.

Every module here that adds commands exposes `register(app: typer.Typer) -> None`; a command
group (`tools`, `mcp`, …) registers its own sub-commands the same way. Help texts are plain
text (`rich_markup_mode=None`), so `[safety]` in a help text reads as written and a flag shows
as `--json` or `--x / --no-x`, never with a `<bool>` value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Final

import typer
from rich.logging import RichHandler

from . import audit, cases, channels, check, demo, doctor, inspection, mcp, run, tools, web, workers
from .console import err, out

__all__ = ["REGISTRATIONS", "app", "main"]

app = typer.Typer(
    name="wakeful",
    help="A runtime for event-driven, asynchronous, tool-using LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

REGISTRATIONS: Final[tuple[Callable[[typer.Typer], None], ...]] = (
    run.register,  # init, run
    web.register,  # console
    demo.register,  # demo async
    inspection.register,  # events tail, tasks, timers
    workers.register,  # workers
    channels.register,  # channels
    doctor.register,  # doctor
    audit.register,  # audit stats, audit export
    cases.register,  # cases list, cases show, cases export
    check.register,  # check-command
    tools.register,  # tools lint, tools search
    mcp.register,  # mcp serve, mcp list, mcp audit, mcp approve
)
"""Every command module, in the order `wakeful --help` lists their commands."""

for register in REGISTRATIONS:
    register(app)


def installed_version() -> str:
    """wakeful's version as installed, or "unknown" when run from a source tree that is not."""
    try:
        return version("wakeful")
    except PackageNotFoundError:
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        out.print(f"wakeful {installed_version()}", markup=False)
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the installed version and exit.",
            callback=_show_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """A runtime for event-driven, asynchronous, tool-using LLM agents."""


def main() -> None:
    # Warnings (retries, fallbacks) go to stderr, one readable line each.
    logging.basicConfig(
        level=logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_path=False, show_time=False, markup=False)],
    )
    app(prog_name="wakeful")
