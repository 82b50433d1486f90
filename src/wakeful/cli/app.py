"""The `wakeful` command line."""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import anyio
import typer
from rich.logging import RichHandler
from rich.markup import escape

from ..errors import StoreError, UserError
from .audit import register as register_audit
from .check import register as register_check_command
from .console import err, fail, out
from .doctor import register as register_doctor
from .mcp import mcp_app
from .store import DbOption, InspectConfigOption, reading_store
from .tools import tools_app

if TYPE_CHECKING:
    pass

app = typer.Typer(
    name="wakeful",
    help="A runtime for event-driven, asynchronous, tool-using LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
demo_app = typer.Typer(
    help="Scripted demonstrations that need no model or API key.", no_args_is_help=True
)
events_app = typer.Typer(
    help="Inspect the events of a running or stopped runtime.", no_args_is_help=True
)
app.add_typer(demo_app, name="demo")
app.add_typer(events_app, name="events")
app.add_typer(tools_app, name="tools")
app.add_typer(mcp_app, name="mcp")
register_audit(app)
register_check_command(app)
register_doctor(app)


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


@app.command()
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


@app.command()
def run(
    config: ConfigOption = Path("wakeful.toml"),
    session: Annotated[str, typer.Option(help="The session to talk to.")] = "main",
    quiet: Annotated[bool, typer.Option("--quiet", help="Hide tool calls.")] = False,
) -> None:
    """Start the runtime with the configured agent and a console chat."""
    from ..config import build_gate, build_model, build_router, load_config, protect_in_sandbox

    try:
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
            observer=ConsoleObserver(out, verbose=not quiet),
            gate=gate,
            settings=protect_in_sandbox(
                cfg.settings(), Path.cwd(), [config, cfg.mcp.lock_file, cfg.store.path]
            ),
            workdir=Path.cwd(),
            discovery=cfg.discovery,
            skills=cfg.skills.settings(),
            mcp_pins=pins,
        )
        try:
            async with rt:
                await ConsoleChannel(rt, session=session, console=out).run()
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


def _expected_failure(exc: BaseException) -> UserError | StoreError | None:
    """The configuration or store error a run ended with, also from inside a task group."""
    if isinstance(exc, UserError | StoreError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _expected_failure(exc.exceptions[0])
    return None


@demo_app.command("async")
def demo_async(
    speed: Annotated[
        float,
        typer.Option(min=0.1, max=100, help="Time scale: 10 runs the experiment ten times faster."),
    ] = 5.0,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print each final trajectory as JSON lines in the OpenAI message shape."
        ),
    ] = False,
    scenario: Annotated[
        list[str] | None, typer.Option(help="Run only this scenario (repeatable).")
    ] = None,
) -> None:
    """Experiment 4-5: background work, batching, stop, and three scripts in parallel."""
    from ..demo.async_scenarios import SCENARIOS, run_scenario
    from ..messages import to_openai_shape

    names = scenario or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise fail(f"Unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}.")

    from ..demo.trajectory_printer import TrajectoryPrinter

    async def main() -> None:
        for name in names:
            with tempfile.TemporaryDirectory(prefix=f"wakeful-demo-{name}-") as tmp:
                observer = None if as_json else TrajectoryPrinter(out, title=name)
                result = await run_scenario(name, speed=speed, workdir=Path(tmp), observer=observer)
            if as_json:
                sys.stdout.write(json.dumps({"scenario": name}) + "\n")
                for message in result.messages:
                    sys.stdout.write(
                        json.dumps(to_openai_shape(message), ensure_ascii=False) + "\n"
                    )
                sys.stdout.flush()
            else:
                out.print(
                    f"[bold]✓ {name}[/bold]: {len(result.messages)} messages, "
                    f"{len(result.sent)} sent to the user\n"
                )

    anyio.run(main)


# --- inspecting a store ---------------------------------------------------------------------------

# How often `events tail --follow` looks for new events, and how many it reads per look.
FOLLOW_POLL_SECONDS: Final = 0.5
FOLLOW_BATCH: Final = 500

SessionFilter = Annotated[
    str | None, typer.Option("--session", "-s", help="Only this session.", show_default=False)
]


@events_app.command("tail")
def events_tail(
    config: InspectConfigOption = None,
    db: DbOption = None,
    session: SessionFilter = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100_000, help="How many events to show.")
    ] = 20,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='One JSON object per line: {"rowid", "status", "event"}.'),
    ] = False,
) -> None:
    """Show the latest events, oldest first, with their status (pending or consumed)."""
    from .inspect_views import event_json, events_table

    with reading_store(config, db) as reader:
        latest = reader.recent_events(limit, session)
        if as_json:
            for stored in latest:
                _print_json(event_json(stored))
            sys.stdout.flush()
        elif latest:
            out.print(events_table(latest))
        else:
            where = f" of session {session!r}" if session is not None else ""
            waiting = "; waiting for new ones (Ctrl-C stops)" if follow else ""
            out.print(
                f"[dim]No events{escape(where)} in {escape(str(reader.path))} yet{waiting}.[/dim]"
            )
        if not follow:
            return
        last_rowid = latest[-1].rowid if latest else 0
        try:
            while True:
                time.sleep(FOLLOW_POLL_SECONDS)
                new = reader.recent_events(FOLLOW_BATCH, session, after_rowid=last_rowid)
                if not new:
                    continue
                last_rowid = new[-1].rowid
                if as_json:
                    for stored in new:
                        _print_json(event_json(stored))
                    sys.stdout.flush()
                else:
                    out.print(events_table(new, header=not latest))
                    latest = new
        except KeyboardInterrupt:
            return


@app.command("tasks")
def tasks_command(
    config: InspectConfigOption = None,
    db: DbOption = None,
    session: SessionFilter = None,
    as_json: Annotated[bool, typer.Option("--json", help="One task per line as JSON.")] = False,
) -> None:
    """List the stored tasks (background work and finished calls), lost ones included."""
    from .inspect_views import task_json, tasks_table

    with reading_store(config, db) as reader:
        records = reader.tasks(session)
        if as_json:
            for record in records:
                _print_json(task_json(record))
        elif records:
            out.print(tasks_table(records))
        else:
            where = f" of session {session!r}" if session is not None else ""
            out.print(f"[dim]No tasks{escape(where)} in {escape(str(reader.path))}.[/dim]")


@app.command("timers")
def timers_command(
    config: InspectConfigOption = None,
    db: DbOption = None,
    session: SessionFilter = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also list finished and cancelled timers.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One timer per line as JSON.")] = False,
) -> None:
    """List the active timers, soonest first, with their next fire in local time and UTC."""
    from .inspect_views import timer_json, timers_table

    with reading_store(config, db) as reader:
        records = reader.timers(session, active_only=not show_all)
        if as_json:
            for record in records:
                _print_json(timer_json(record))
        elif records:
            out.print(timers_table(records, with_state=show_all))
        else:
            which = "timers" if show_all else "active timers"
            where = f" of session {session!r}" if session is not None else ""
            out.print(f"[dim]No {which}{escape(where)} in {escape(str(reader.path))}.[/dim]")


def main() -> None:
    # Warnings (retries, fallbacks) go to stderr, one readable line each.
    logging.basicConfig(
        level=logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_path=False, show_time=False, markup=False)],
    )
    app()


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
