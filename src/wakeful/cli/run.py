"""`wakeful init` and `wakeful run`: write a configuration, then chat with the agent it
describes in the terminal."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.markup import escape

from ..errors import StoreError, UserError
from .console import err, fail, out

if TYPE_CHECKING:
    from ..runtime.runtime import Runtime

__all__ = ["NO_MODEL_HELP", "register"]


def register(app: typer.Typer) -> None:
    """Add `init` and `run` to the `wakeful` application."""
    app.command("init")(init)
    app.command("run")(run)


DEFAULT_WEB_ADDRESS = "127.0.0.1:8787"
"""Where `wakeful run --web` serves the console: this machine only."""

ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="The configuration file.", dir_okay=False)
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
    session: Annotated[str, typer.Option(help="The session to talk to.")] = "main",
    quiet: Annotated[bool, typer.Option("--quiet", help="Hide tool calls.")] = False,
    web: Annotated[
        bool,
        typer.Option(
            "--web",
            help="Also serve the web console (see --web-address); its URL, with the token, is "
            "printed at start-up. Without a terminal on stdin, only the web console runs.",
        ),
    ] = False,
    web_address: Annotated[
        str,
        typer.Option(
            "--web-address",
            help="HOST:PORT of the web console. The token is $WAKEFUL_WEB_TOKEN when set.",
        ),
    ] = DEFAULT_WEB_ADDRESS,
) -> None:
    """Start the runtime with the configured agent and a console chat."""
    from ..config import build_gate, build_model, build_router, load_config, protect_in_sandbox

    try:
        web_host, web_port = parse_web_address(web_address)
        cfg = load_config(config)
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

    from ..channels.console import ConsoleChannel, ConsoleObserver
    from ..channels.registry import specs_from_tables
    from ..runtime.runtime import Runtime

    async def main() -> None:
        rt = Runtime(
            model=model,
            store_path=cfg.store.path,
            store_synchronous=cfg.store.synchronous,
            evict_idle_after_seconds=cfg.store.evict_idle_after_seconds,
            mcp_servers=cfg.mcp.servers,
            session_config=cfg.session_config(),
            router=router,
            parallel_model=parallel,
            observer=ConsoleObserver(
                out, verbose=not quiet, assistant_text_sent=cfg.agent.send_assistant_text
            ),
            gate=gate,
            settings=protect_in_sandbox(
                cfg.settings(), Path.cwd(), [config, cfg.mcp.lock_file, cfg.store.path]
            ),
            workdir=Path.cwd(),
            discovery=cfg.discovery,
            skills=cfg.skills.settings(),
            mcp_pins=pins,
            channels=specs_from_tables(cfg.channels),
        )
        try:
            async with rt:
                if not web:
                    await ConsoleChannel(rt, session=session, console=out).run()
                    return
                await _run_with_web_console(rt, session, web_host, web_port)
        finally:
            # Provider adapters hold an HTTP client; the Model interface does not require one.
            for used in (model, parallel):
                close = getattr(used, "aclose", None)
                if close is not None:
                    await close()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        out.print("\nbye")
    except (UserError, StoreError, BaseExceptionGroup) as exc:
        failure = _expected_failure(exc)
        if failure is None:
            raise
        raise fail(str(failure)) from exc


def parse_web_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:8787` for IPv6) as a host and a port; UserError naming the fix."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UserError(
            f"--web-address {address!r} is not HOST:PORT; give for example "
            f"{DEFAULT_WEB_ADDRESS} (a port from 0 to 65535)."
        )
    return host, int(port)


async def _run_with_web_console(rt: Runtime, session: str, host: str, port: int) -> None:
    """The web console, and the terminal one when stdin is a terminal; leaving the terminal
    console (/quit, end of input) stops both."""
    import os

    from ..channels.console import ConsoleChannel
    from ..web import ConsoleAuth, WebConsole, new_token, serve_console

    token = os.environ.get("WAKEFUL_WEB_TOKEN") or new_token()
    console = WebConsole(rt, ConsoleAuth.for_address(token, host, port), session=session)
    async with anyio.create_task_group() as tg:
        bound = await tg.start(serve_console, console, host, port)
        shown = f"[{host}]" if ":" in host else host
        out.print(f"Web console: http://{shown}:{bound}/?token={token}", markup=False)
        if host not in ("127.0.0.1", "localhost", "::1"):
            err.print(
                f"[yellow]The web console listens on {escape(host)}, not only on this machine: "
                "anyone who can reach it and learns the token can act as you.[/yellow]"
            )
        if sys.stdin.isatty():
            await ConsoleChannel(rt, session=session, console=out).run()
            tg.cancel_scope.cancel()


def _expected_failure(exc: BaseException) -> UserError | StoreError | None:
    """The configuration or store error a run ended with, also from inside a task group."""
    if isinstance(exc, UserError | StoreError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _expected_failure(exc.exceptions[0])
    return None
