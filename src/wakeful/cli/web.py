"""`wakeful console`: the runtime with the web console only, no terminal chat.

The same runtime as `wakeful run` (see :mod:`.run`, whose pieces it uses): the configured
model, store (`--store` as in `wakeful run`: a SQLite file or a shared PostgreSQL database),
tools and channels. The console listens where `--web-address` or `[web] address`
in wakeful.toml says (127.0.0.1:8787 by default) and prints its URL with the token; it runs
until Ctrl-C.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .run import (
    ConfigOption,
    QuietOption,
    RunStoreOption,
    WebAddressOption,
    prepare_run,
    run_until_done,
    serve_web_console,
    web_console_options,
)

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add `console` to the `wakeful` application."""
    app.command("console")(console)


def console(
    config: ConfigOption = Path("wakeful.toml"),
    session: Annotated[
        str | None,
        typer.Option(help="The session the console opens on (default: [web] session, main)."),
    ] = None,
    web_address: WebAddressOption = None,
    quiet: QuietOption = False,
    store: RunStoreOption = None,
) -> None:
    """Start the runtime with the web console only; open the URL it prints (it carries the
    token). Tool calls are printed here as they run, unless --quiet."""
    prepared = prepare_run(config, store=store)
    options = web_console_options(prepared.config, web_address, session)

    async def serve(rt: Runtime) -> None:
        await serve_web_console(rt, options, terminal_session=None)

    run_until_done(prepared, serve, quiet=quiet)
