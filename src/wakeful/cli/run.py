"""`wakeful init` and `wakeful run`: write a configuration, then chat with the agent it
describes in the terminal (and, with --web, in the browser).

The pieces `wakeful console` (:mod:`.web`) shares are here too: `prepare_run` (wakeful.toml
to a model, router and gate), `run_until_done` (the runtime around a console), and the web
console's options (`[web]`, the command line winning; refused when a webhook channel listens on
the same address) and serving (`serve_web_console`)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.markup import escape

from ..errors import StoreError, UserError
from .console import err, fail, out

if TYPE_CHECKING:
    from ..agent.router import Router
    from ..agent.session_config import SessionObserver
    from ..config import ChannelTable, StoreConfig, WakefulConfig
    from ..mcp.pins import ToolPins
    from ..models.base import Model
    from ..runtime.runtime import Runtime
    from ..safety.gate import CallGate

__all__ = [
    "NO_MODEL_HELP",
    "PreparedRun",
    "WebConsoleOptions",
    "prepare_run",
    "register",
    "run_until_done",
    "serve_web_console",
    "web_console_options",
]


def register(app: typer.Typer) -> None:
    """Add `init` and `run` to the `wakeful` application."""
    app.command("init")(init)
    app.command("run")(run)


DEFAULT_WEB_ADDRESS = "127.0.0.1:8787"
"""Where the web console listens unless told otherwise: this machine only."""

ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="The configuration file.", dir_okay=False)
]
QuietOption = Annotated[bool, typer.Option("--quiet", help="Hide tool calls.")]
RunStoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Where the runtime keeps its state, over [store] in the configuration: a SQLite "
        "file, or a PostgreSQL database as postgresql://USER@HOST:PORT/DATABASE (no password in "
        "the URL: set PGPASSWORD or use ~/.pgpass; needs pip install 'wakeful[postgres]').",
        show_default=False,
    ),
]
"""Text, not a path, so that a URL keeps its `//`."""
WebAddressOption = Annotated[
    str | None,
    typer.Option(
        "--web-address",
        help=f"HOST:PORT of the web console (default: [web] address in wakeful.toml, else "
        f"{DEFAULT_WEB_ADDRESS}). The token is $WAKEFUL_WEB_TOKEN (or [web] token_env) when set.",
    ),
]


NO_MODEL_HELP = """\
No model is configured, so there is no agent to run yet.

Configure one in {path} (run `wakeful init` to create it), for example:

  OpenAI:
    [model]
    provider = "openai"
    name = "gpt-4.1-mini"
    api_key_env = "OPENAI_API_KEY"

  Anthropic:
    [model]
    provider = "anthropic"
    name = "claude-sonnet-4-5"
    api_key_env = "ANTHROPIC_API_KEY"

  A local OpenAI-compatible server (Ollama, vLLM, llama.cpp server, LM Studio):
    [model]
    provider = "openai"
    name = "qwen3:4b"
    base_url = "http://127.0.0.1:11434/v1"

To see the runtime work without any model, run the scripted demo:

    wakeful demo async
"""


def init(
    path: Annotated[Path, typer.Option("--path", help="Where to write it.")] = Path("wakeful.toml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    print_only: Annotated[bool, typer.Option("--print", help="Print it instead.")] = False,
) -> None:
    """Write a commented default wakeful.toml."""
    from ..config import DEFAULT_CONFIG_TOML

    if print_only:
        sys.stdout.write(DEFAULT_CONFIG_TOML)
        return
    if path.is_dir():
        raise fail(
            f"{path} is a directory. Give --path a file name, for example {path / 'wakeful.toml'}."
        )
    if path.exists() and not force:
        raise fail(
            f"{path} already exists; pass --force to overwrite it, or --print to see the defaults."
        )
    try:
        path.write_text(DEFAULT_CONFIG_TOML, encoding="utf-8")
    except OSError as exc:
        raise fail(
            f"Cannot write {path}: {exc.strerror or exc}. Check that its directory exists and is "
            "writable, or choose another --path."
        ) from exc
    out.print(f"Wrote {escape(str(path))}. Uncomment a \\[model] block, then run `wakeful run`.")


def run(
    config: ConfigOption = Path("wakeful.toml"),
    session: Annotated[
        str | None,
        typer.Option(
            help="The session to talk to (default: main; the web console's, [web] session)."
        ),
    ] = None,
    quiet: QuietOption = False,
    web: Annotated[
        bool,
        typer.Option(
            "--web",
            help="Also serve the web console (see --web-address); its URL, with the token, is "
            "printed at start-up. Without a terminal on stdin, only the web console runs.",
        ),
    ] = False,
    web_address: WebAddressOption = None,
    store: RunStoreOption = None,
) -> None:
    """Start the runtime with the configured agent and a console chat."""
    prepared = prepare_run(config, store=store)
    options = web_console_options(prepared.config, web_address, session) if web else None

    async def chat(rt: Runtime) -> None:
        from ..channels.console import ConsoleChannel

        if options is None:
            await ConsoleChannel(rt, session=session or "main", console=out).run()
            return
        await serve_web_console(rt, options, terminal_session=session or "main")

    run_until_done(prepared, chat, quiet=quiet)


@dataclass(frozen=True)
class PreparedRun:
    """What a run needs from wakeful.toml, built and checked before anything starts."""

    path: Path
    config: WakefulConfig
    model: Model
    parallel: Model | None
    router: Router
    gate: CallGate | None
    pins: ToolPins | None


def prepare_run(config: Path, *, store: str | None = None) -> PreparedRun:
    """Load `config` and build its model, router, gate and MCP pins; a configuration error is
    printed with its fix (exit 1), a missing model with examples (exit 2). `store` (`--store`:
    a file path or a PostgreSQL URL) replaces the configuration's `[store]` location."""
    from ..config import build_gate, build_model, build_router, load_config

    try:
        cfg = load_config(config)
        if store is not None:
            cfg.store = with_store_location(cfg.store, store)
        if cfg.model is None:
            err.print(NO_MODEL_HELP.format(path=config), markup=False)
            raise typer.Exit(2)
        model = build_model(cfg.model)
        parallel = build_model(cfg.parallel_model) if cfg.parallel_model else None
        router = build_router(cfg.router)
        gate = build_gate(cfg.safety, rules=cfg.agent.system_prompt)
        pins = None
        if cfg.mcp.pinning and cfg.mcp.servers:
            from ..mcp.pins import ToolPins

            pins = ToolPins.load(cfg.mcp.lock_file, default_mode=cfg.mcp.pin_mode)
    except UserError as exc:
        raise fail(str(exc)) from exc
    return PreparedRun(config, cfg, model, parallel, router, gate, pins)


def with_store_location(config: StoreConfig, location: str) -> StoreConfig:
    """`[store]` with its location replaced by `--store LOCATION`: a PostgreSQL URL (checked:
    a misspelt scheme or a password in it is a UserError) or a SQLite file path."""
    from ..runtime.settings import check_store_url, is_store_url

    if is_store_url(location):
        return config.model_copy(update={"url": check_store_url(location, given_as="--store")})
    return config.model_copy(update={"path": Path(location).expanduser(), "url": None})


def build_runtime(prepared: PreparedRun, *, observer: SessionObserver | None = None) -> Runtime:
    """The runtime `prepared` describes (not yet entered): `wakeful run`'s, the web console's
    and the collaboration MCP server's; `observer` shows its work (None: nothing is shown)."""
    from ..channels.registry import specs_from_tables
    from ..config import protect_in_sandbox
    from ..runtime.runtime import Runtime

    cfg = prepared.config
    rt = Runtime(
        model=prepared.model,
        # A PostgreSQL database when [store] (or --store) gives a URL, else the SQLite file.
        store_path=cfg.store.path if cfg.store.url is None else None,
        store_url=cfg.store.url,
        store_synchronous=cfg.store.synchronous,
        evict_idle_after_seconds=cfg.store.evict_idle_after_seconds,
        mcp_servers=cfg.mcp.servers,
        session_config=cfg.session_config(),
        router=prepared.router,
        parallel_model=prepared.parallel,
        observer=observer,
        gate=prepared.gate,
        settings=protect_in_sandbox(
            cfg.settings(), Path.cwd(), [prepared.path, cfg.mcp.lock_file, cfg.store.path]
        ),
        workdir=Path.cwd(),
        discovery=cfg.discovery,
        skills=cfg.skills.settings(),
        mcp_pins=prepared.pins,
        channels=specs_from_tables(cfg.channels),
        delivery=cfg.delivery,
        agents=cfg.agent_definitions(),
        subagent_limits=cfg.subagent_limits(),
    )
    if cfg.store.url is not None and cfg.store.workers:
        from ..runtime.worker import SessionCluster

        # One worker of several on the database: it owns the sessions it holds a lease on.
        rt.cluster = SessionCluster(
            lease_seconds=cfg.store.lease_seconds, name=cfg.store.worker_name
        )
    return rt


async def _stop_on_sigterm(console: anyio.CancelScope, everything: anyio.CancelScope) -> None:
    """On SIGTERM, cancel `console` (the console around the runtime; one cancelled before the
    runtime has started ends as soon as it has); on a second one, `everything` at once."""
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            if console.cancel_called:
                everything.cancel()
                return
            err.print("Stopping: SIGTERM received (send it again to stop at once).")
            console.cancel()


async def close_models(prepared: PreparedRun) -> None:
    """Close the provider adapters' HTTP clients (the Model interface does not require one)."""
    for used in (prepared.model, prepared.parallel):
        close = getattr(used, "aclose", None)
        if close is not None:
            await close()


def run_until_done(
    prepared: PreparedRun, body: Callable[[Runtime], Awaitable[None]], *, quiet: bool
) -> None:
    """Run the runtime `prepared` describes around `body` (a console) until it returns, Ctrl-C
    or SIGTERM; a configuration or store error on the way is printed with its fix (exit 1).

    SIGTERM (what `docker stop`, systemd and Kubernetes send) stops the runtime as its end
    would: sessions stopped where they may resume, and, as one worker of several, its sessions
    released for the other workers at once rather than after the lease time (exit 0)."""
    from ..channels.console import ConsoleObserver

    cfg = prepared.config

    async def main() -> None:
        observer = ConsoleObserver(
            out, verbose=not quiet, assistant_text_sent=cfg.agent.send_assistant_text
        )
        console = anyio.CancelScope()  # what SIGTERM cancels: the runtime then ends as usual
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_stop_on_sigterm, console, tg.cancel_scope)
                rt = build_runtime(prepared, observer=observer)
                async with rt:
                    with console:
                        await body(rt)
                tg.cancel_scope.cancel()
        finally:
            await close_models(prepared)

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        out.print("\nbye")
    except (UserError, StoreError, BaseExceptionGroup) as exc:
        failure = expected_failure(exc)
        if failure is None:
            raise
        raise fail(str(failure)) from exc


def parse_web_address(address: str, *, option: str = "--web-address") -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:8787` for IPv6) as a host and a port; UserError naming the fix and
    where the address was given (`option`)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UserError(
            f"{option} {address!r} is not HOST:PORT; give for example "
            f"{DEFAULT_WEB_ADDRESS} (a port from 0 to 65535)."
        )
    return host, int(port)


@dataclass(frozen=True)
class WebConsoleOptions:
    """Where the web console listens, the session it opens on, and the environment variable
    that may hold a fixed token: `[web]` in wakeful.toml, with the command line winning."""

    host: str
    port: int
    session: str
    token_env: str


def web_console_options(
    cfg: WakefulConfig, address: str | None, session: str | None
) -> WebConsoleOptions:
    """The console's options from the command line (`address`, `session`; None: not given)
    over `[web]`; UserError for an address that is not HOST:PORT or that a webhook channel
    of the configuration listens on too."""
    try:
        if address is not None:
            host, port = parse_web_address(address)
        else:
            host, port = parse_web_address(cfg.web.address, option="[web] address in wakeful.toml:")
        refuse_webhook_clash(host, port, cfg.channels)
    except UserError as exc:
        raise fail(str(exc)) from exc
    return WebConsoleOptions(host, port, session or cfg.web.session, cfg.web.token_env)


_ANY_ADDRESS = frozenset({"0.0.0.0", "::", ""})
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost"})


def refuse_webhook_clash(
    host: str, port: int, channels: Mapping[str, Sequence[ChannelTable]]
) -> None:
    """UserError when a `[[channels.webhook]]` table listens where the console would: both
    default to port 8787, and the second to start would fail to bind, half-way through."""
    if port == 0:
        return
    from ..channels.webhooks.settings import DEFAULT_PORT, WebhookSettings

    default_host = str(WebhookSettings.model_fields["host"].default)
    for table in channels.get("webhook", []):
        settings = table.settings
        if settings.get("port", DEFAULT_PORT) != port:
            continue
        webhook_host = str(settings.get("host", default_host))
        if not _same_interface(host, webhook_host):
            continue
        shown = f"[{host}]" if ":" in host else host
        raise UserError(
            f"The web console and the webhook channel webhook:{table.name} ({table.origin}) "
            f"would both listen on {shown}:{port}. Give the console another port with "
            f"--web-address {shown}:{port + 1} (or `address` under [web] in wakeful.toml), or "
            f"the webhook channel another `port` in its table."
        )


def _same_interface(one: str, other: str) -> bool:
    if one == other or one in _ANY_ADDRESS or other in _ANY_ADDRESS:
        return True
    return one in _LOOPBACK_NAMES and other in _LOOPBACK_NAMES


async def serve_web_console(
    rt: Runtime, options: WebConsoleOptions, *, terminal_session: str | None
) -> None:
    """Serve the web console until cancelled (Ctrl-C), and print its URL with the token. With
    a `terminal_session` and a terminal on stdin, the terminal console runs too, and leaving it
    (/quit, end of input) stops both."""
    import os

    from ..channels.console import ConsoleChannel
    from ..web import ConsoleAuth, WebConsole, new_token, serve_console

    host, port = options.host, options.port
    token = os.environ.get(options.token_env) or new_token()
    auth = ConsoleAuth.for_address(token, host, port)
    console = WebConsole(rt, auth, session=options.session)
    async with anyio.create_task_group() as tg:
        bound = await tg.start(serve_console, console, host, port)
        shown = f"[{host}]" if ":" in host else host
        out.print(f"Web console: http://{shown}:{bound}/?token={token}", markup=False)
        if host not in ("127.0.0.1", "localhost", "::1"):
            err.print(
                f"[yellow]The web console listens on {escape(host)}, not only on this machine: "
                "anyone who can reach it and learns the token can act as you.[/yellow]"
            )
        if terminal_session is not None and sys.stdin.isatty():
            await ConsoleChannel(rt, session=terminal_session, console=out).run()
            tg.cancel_scope.cancel()


def expected_failure(exc: BaseException) -> UserError | StoreError | None:
    """The configuration or store error a run ended with, also from inside a task group."""
    if isinstance(exc, UserError | StoreError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return expected_failure(exc.exceptions[0])
    return None
