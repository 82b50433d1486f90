"""The `wakeful` command line."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from .errors import UserError

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

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="The configuration file.", dir_okay=False)
]


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/bold red] {escape(message)}")
    return typer.Exit(code)


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
    from .config import DEFAULT_CONFIG_TOML

    if print_only:
        sys.stdout.write(DEFAULT_CONFIG_TOML)
        return
    if path.exists() and not force:
        raise fail(
            f"{path} already exists; pass --force to overwrite it, or --print to see the defaults."
        )
    path.write_text(DEFAULT_CONFIG_TOML, encoding="utf-8")
    out.print(f"Wrote {path}. Uncomment a [model] block, then run `wakeful run`.")


@app.command()
def run(
    config: ConfigOption = Path("wakeful.toml"),
    session: Annotated[str, typer.Option(help="The session to talk to.")] = "main",
    quiet: Annotated[bool, typer.Option("--quiet", help="Hide tool calls.")] = False,
) -> None:
    """Start the runtime with the configured agent and a console chat."""
    from .config import build_model, build_router, load_config

    try:
        cfg = load_config(config)
        if cfg.model is None:
            err.print(NO_MODEL_HELP.format(path=config), markup=False)
            raise typer.Exit(2)
        model = build_model(cfg.model)
        parallel = build_model(cfg.parallel_model) if cfg.parallel_model else None
        router = build_router(cfg.router)
    except UserError as exc:
        raise fail(str(exc)) from exc

    from .channels.console import ConsoleChannel, ConsoleObserver
    from .runtime import Runtime

    async def main() -> None:
        rt = Runtime(
            model=model,
            store_path=cfg.store.path,
            session_config=cfg.agent.session_config(),
            router=router,
            parallel_model=parallel,
            observer=ConsoleObserver(out, verbose=not quiet),
        )
        async with rt:
            await ConsoleChannel(rt, session=session, console=out).run()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        out.print("\nbye")
    except UserError as exc:
        raise fail(str(exc)) from exc


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
    from .demo.async_scenarios import SCENARIOS, run_scenario
    from .messages import to_openai_shape

    names = scenario or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise fail(f"Unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}.")

    from .demo.trajectory_printer import TrajectoryPrinter

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


def main() -> None:
    app()


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
