"""`wakeful mcp …`: run wakeful's MCP servers, over stdio (the default) or Streamable HTTP.

`mcp_app` is a Typer sub-application; `register(app)` mounts it as `wakeful mcp`. It also runs on
its own: `python -m wakeful.cli.mcp serve perception --root .`.
"""

from __future__ import annotations

import errno
import functools
import logging
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from ..errors import StoreError, UserError
from . import mcp_list, mcp_trust
from .console import err, fail
from .run import RunStoreOption
from .store import store_location

if TYPE_CHECKING:
    from ..mcp.bridge import BridgeServer
    from .run import PreparedRun

mcp_app = typer.Typer(
    help="Run wakeful's MCP servers for other agents and editors.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
serve_app = typer.Typer(
    help="Serve one MCP server over stdio (default) or Streamable HTTP.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
mcp_app.add_typer(serve_app, name="serve")
mcp_trust.register(mcp_app)
mcp_list.register(mcp_app)


def register(app: typer.Typer) -> None:
    """Add the `mcp` command group (`serve`, `list`, `audit`, `approve`) to `wakeful`."""
    app.add_typer(mcp_app, name="mcp")


def parse_http_address(value: str | None) -> tuple[str, int] | None:
    """HOST:PORT as (host, port); a typer.BadParameter (exit 2) for anything else."""
    if value is None:
        return None
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise typer.BadParameter(
            f"{value!r} is not HOST:PORT with a port from 1 to 65535; use e.g. 127.0.0.1:8765."
        )
    return host, int(port_text)


HttpOption = Annotated[
    str | None,
    typer.Option(
        "--http",
        metavar="HOST:PORT",
        help="Serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
    ),
]


@serve_app.command("perception")
def serve_perception(
    root: Annotated[
        Path,
        typer.Option("--root", help="The directory the file tools may read; nothing outside."),
    ] = Path("."),
    http: HttpOption = None,
) -> None:
    """The perception tools: files under --root, documents, web, public data, calendars."""
    address = parse_http_address(http)
    _check_root(root)
    try:
        # Imported here: the perception tools load heavy libraries the rest of the CLI never needs.
        from ..toolkits.perception.server import perception_server

        server = perception_server(root)
    except UserError as exc:
        raise fail(str(exc)) from exc
    # stdout carries the protocol under stdio; logs go to stderr.
    _serve(server, address)


@serve_app.command("execution")
def serve_execution(
    root: Annotated[
        Path,
        typer.Option("--root", help="The workspace the tools may change; nothing outside."),
    ] = Path("."),
    http: HttpOption = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="wakeful.toml with [safety] and [tools.*] (optional). Without it, "
            "./wakeful.toml is read only if it lies outside ROOT, where the agent cannot write.",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="SQLite file for idempotency keys, confirmation tokens and the audit log "
            "(default: ROOT/.wakeful/execution.db).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The execution tools: write/edit files, sandboxed shell and Python, spreadsheets, email,
    calendar, webhooks, GitHub — every call behind the safety layers of [safety]."""
    address = parse_http_address(http)
    store_file = _execution_store_file(store)
    _check_root(root)
    try:
        from ..config import WakefulConfig, build_gate, load_config, protect_in_sandbox
        from ..toolkits.execution.server import execution_server

        config_path = config if config is not None else _implicit_config(root)
        cfg = load_config(config_path) if config_path is not None else WakefulConfig()
        commands = cfg.safety.commands
        if commands.workspace is None:
            commands = commands.model_copy(update={"workspace": root.resolve()})
        safety = cfg.safety.model_copy(update={"commands": commands})
        server = execution_server(
            root,
            settings=protect_in_sandbox(
                [*safety.settings(), *cfg.tools.settings()],
                root,
                [p for p in (config_path, store_file) if p is not None],
            ),
            store_path=store_file,
            gate=build_gate(safety, rules=cfg.agent.system_prompt),
        )
    except UserError as exc:
        raise fail(str(exc)) from exc
    _serve(server, address)


@serve_app.command("collaboration")
def serve_collaboration(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            help="wakeful.toml with [model], [[agents]], [subagents], [tools.collaboration] and "
            "[store]: the runtime behind the server.",
            dir_okay=False,
        ),
    ] = Path("wakeful.toml"),
    http: HttpOption = None,
    store: RunStoreOption = None,
) -> None:
    """The collaboration tools: subagents (spawn, wait, message, cancel, list) and requests to
    people (approval, input: through the client's elicitation when it has it, else the
    runtime's channels), served by a wakeful runtime built from --config (and --store, as in
    `wakeful run`)."""
    from .run import expected_failure, prepare_run

    address = parse_http_address(http)
    prepared = prepare_run(config, store=store)
    _log_to_stderr()
    sock = None
    if address is not None:
        try:
            sock = bind_http(*address)
        except UserError as exc:
            raise fail(str(exc)) from exc
    try:
        anyio.run(functools.partial(serve_collaboration_runtime, prepared, address, sock=sock))
    except KeyboardInterrupt:
        return
    except (UserError, StoreError, BaseExceptionGroup) as exc:
        failure = expected_failure(exc)
        if failure is None:
            raise
        raise fail(str(failure)) from exc


async def serve_collaboration_runtime(
    prepared: PreparedRun,
    address: tuple[str, int] | None,
    *,
    sock: socket.socket | None = None,
) -> None:
    """Run the runtime `prepared` describes, and serve the collaboration tools over it until
    the client disconnects (stdio) or the process is interrupted (HTTP)."""
    from ..toolkits.collaboration.server import NO_AGENTS, collaboration_server
    from .run import build_runtime, close_models

    # As `wakeful run` builds it, with no observer: under stdio, stdout carries the protocol.
    rt = build_runtime(prepared)
    try:
        async with rt:
            if rt.approvals is None:  # set on entry; a runtime that did not start raised
                raise UserError("The runtime started without its queue of requests to people.")
            off = f"{NO_AGENTS} (read from {prepared.path})"
            if rt.subagents is None:
                err.print(f"The subagent tools are off: {off}.", markup=False)
            server = collaboration_server(
                rt.services, rt.approvals, rt.subagents, subagents_off=off
            )
            if address is None:
                await serve_stdio(server)
            else:
                await serve_http(server, *address, sock=sock)
    finally:
        await close_models(prepared)


async def serve_stdio(server: BridgeServer) -> None:
    """Serve one client on this process's stdin and stdout until it disconnects."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    server: BridgeServer, host: str, port: int, *, sock: socket.socket | None = None
) -> None:
    """Serve Streamable HTTP at http://host:port/mcp until interrupted.

    The address is bound before anything is printed (or `sock`, bound by :func:`bind_http`, is
    used), so a busy port is one clear error rather than "Serving …" followed by uvicorn's.
    """
    import uvicorn

    bound = sock if sock is not None else bind_http(host, port)
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    err.print(f"Serving {server.name} at http://{host}:{port}/mcp", markup=False)
    with bound:
        await uvicorn.Server(config).serve(sockets=[bound])


def bind_http(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or a :class:`UserError` that names the port and the fix."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise UserError(
            f"Cannot serve on {host}:{port}: the host {host!r} does not resolve ({exc.strerror}). "
            "Give an address of this machine, e.g. --http 127.0.0.1:8765."
        ) from exc
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UserError(
                f"Cannot serve on {host}:{port}: port {port} is already in use. Stop the program "
                f"that holds it (e.g. an earlier `wakeful mcp serve`; `ss -ltnp 'sport = :{port}'` "
                f"names it) or choose another port, e.g. --http {host}:{_other_port(port)}."
            ) from exc
        raise UserError(
            f"Cannot serve on {host}:{port}: {exc.strerror or exc}. Give an address of this "
            "machine and a free port, e.g. --http 127.0.0.1:8765 (ports below 1024 need root)."
        ) from exc
    return sock


def _other_port(port: int) -> int:
    return port + 1 if port < 65535 else port - 1


def _execution_store_file(store: str | None) -> Path | None:
    """The SQLite file `--store` names for the execution server; a PostgreSQL URL is refused
    (exit 2) rather than taken for a file name: the server keeps its keys in a file of its own."""
    if store is None:
        return None
    location = store_location(store)
    if isinstance(location, str):
        raise fail(
            "wakeful mcp serve execution keeps its idempotency keys, confirmation tokens and "
            "audit log in a SQLite file of its own and cannot use a PostgreSQL database yet. "
            "Give a file with --store PATH, or leave --store out (ROOT/.wakeful/execution.db).",
            code=2,
        )
    return location


def _check_root(root: Path) -> None:
    if not root.exists():
        raise fail(f"The root {str(root)!r} does not exist. Pass an existing directory to --root.")
    if not root.is_dir():
        raise fail(
            f"The root {str(root)!r} is a file, not a directory. Pass a directory to --root."
        )


IMPLICIT_CONFIG = Path("wakeful.toml")


def _implicit_config(root: Path) -> Path | None:
    """./wakeful.toml, unless it lies inside the root: the agent can write there (a new file
    the sandbox could not keep read-only), and a configuration it wrote could turn the sandbox
    off at the next start. Such a file is read only when named with --config."""
    if not IMPLICIT_CONFIG.is_file():
        return None
    if IMPLICIT_CONFIG.resolve().is_relative_to(root.resolve()):
        err.print(
            f"Not reading {IMPLICIT_CONFIG.resolve()}: it lies inside the root "
            f"{root.resolve()}, where the agent could have written it. Pass --config "
            f"{IMPLICIT_CONFIG} to use it (it is then kept read-only for the agent).",
            markup=False,
        )
        return None
    return IMPLICIT_CONFIG


def _log_to_stderr() -> None:
    # stdout carries the protocol under stdio; logs go to stderr. The level is the stderr
    # handler's, so a client's logging/setLevel (which may lower the wakeful loggers' level to
    # get debug records, see wakeful.mcp.client_log) does not flood the terminal.
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setLevel(logging.WARNING)
    logging.basicConfig(level=logging.WARNING, handlers=[to_stderr])


def _serve(server: BridgeServer, address: tuple[str, int] | None) -> None:
    _log_to_stderr()
    if address is None:
        anyio.run(serve_stdio, server)
        return
    host, port = address
    try:
        sock = bind_http(host, port)
    except UserError as exc:
        raise fail(str(exc)) from exc
    anyio.run(functools.partial(serve_http, server, host, port, sock=sock))


if __name__ == "__main__":
    mcp_app()
