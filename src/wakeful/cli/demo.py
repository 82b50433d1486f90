"""`wakeful demo`: scripted demonstrations that need no model or API key."""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Final

import anyio
import typer
from rich.markup import escape

from .console import err, fail, out

__all__ = ["demo_app", "register"]

demo_app = typer.Typer(
    help="Scripted demonstrations that need no model or API key.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def register(app: typer.Typer) -> None:
    """Add the `demo` command group to the `wakeful` application."""
    app.add_typer(demo_app, name="demo")


DEFAULT_STORE_DIR: Final = Path(".wakeful/demo")


@demo_app.command("async")
def demo_async(
    speed: Annotated[
        float,
        typer.Option(min=0.1, max=100, help="Time scale: 10 runs the scenarios ten times faster."),
    ] = 5.0,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print each final trajectory as JSON lines in the OpenAI Chat Completions "
            "message shape.",
        ),
    ] = False,
    scenario: Annotated[
        list[str] | None, typer.Option(help="Run only this scenario (repeatable).")
    ] = None,
    store_dir: Annotated[
        Path,
        typer.Option(
            "--store-dir",
            help="Where each scenario's store goes, as SCENARIO.db (replaced on each run), for "
            "`wakeful events tail`, `tasks`, `timers` and `audit stats --store …`.",
            file_okay=False,
        ),
    ] = DEFAULT_STORE_DIR,
) -> None:
    """Four scenarios with a scripted model and real commands: a background command while
    answering, instructions batched during a tool, stop, and three scripts in parallel."""
    from ..demo.async_scenarios import SCENARIOS, run_scenario
    from ..messages import to_openai_shape

    names = scenario or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise fail(f"Unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}.")
    stores = {name: store_dir / f"{name}.db" for name in names}
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
        for path in stores.values():
            _remove_store(path)
    except OSError as exc:
        raise fail(
            f"Cannot write the demo's stores in {store_dir}: {exc.strerror or exc}. Choose a "
            "writable folder with --store-dir."
        ) from exc

    from ..demo.trajectory_printer import TrajectoryPrinter

    async def main() -> None:
        for name in names:
            with tempfile.TemporaryDirectory(prefix=f"wakeful-demo-{name}-") as tmp:
                observer = None if as_json else TrajectoryPrinter(out, title=name)
                result = await run_scenario(
                    name,
                    speed=speed,
                    workdir=Path(tmp),
                    observer=observer,
                    store_path=stores[name],
                )
            if as_json:
                sys.stdout.write(json.dumps({"scenario": name}) + "\n")
                for message in result.messages:
                    sys.stdout.write(
                        json.dumps(to_openai_shape(message), ensure_ascii=False) + "\n"
                    )
                sys.stdout.flush()
            else:
                out.print(
                    f"[bold]✓ {escape(name)}[/bold]: {len(result.messages)} messages, "
                    f"{len(result.sent)} sent to the user; stored in "
                    f"{escape(str(stores[name]))}\n"
                )

    anyio.run(main)
    last = shlex.quote(str(stores[names[-1]]))
    where = (
        f"Each scenario's store is in {store_dir}. Look inside one, e.g.:\n"
        f"  wakeful events tail --store {last}\n"
        f"  wakeful tasks --store {last}\n"
        f"  wakeful timers --all --store {last}\n"
        f"  wakeful audit stats --store {last}"
    )
    # With --json, stdout holds only the trajectories.
    (err if as_json else out).print(where, markup=False, highlight=False)


@demo_app.command("email")
def demo_email(
    store_dir: Annotated[
        Path,
        typer.Option(
            "--store-dir",
            help="Where the demo's store goes, as email.db (replaced on each run), for "
            "`wakeful events tail --store …` (add --filtered for what the filter kept back).",
            file_okay=False,
        ),
    ] = DEFAULT_STORE_DIR,
    restart_after: Annotated[
        int,
        typer.Option(
            min=0,
            max=4,
            help="Stop the runtime after this many mails and start a new one on the same store, "
            "as after a crash or an upgrade (0: no restart).",
        ),
    ] = 2,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Play the secretary with the [model] of this wakeful.toml instead of the "
            "scripted one (the same mails, servers and tools).",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Experiment 4-4, the email agent: a real IMAP server (Dovecot) and SMTP relay on
    127.0.0.1, four mails, and a scripted secretary that checks an invitation against the
    calendar and drafts a reply, flags a complaint and tells you its facts, archives marketing;
    a filter keeps a social network's notification from waking it."""
    from ..demo.mail_servers import dovecot_missing

    missing = dovecot_missing()
    if missing:
        raise fail(
            f"The email demo runs a real mail server, and Dovecot is not installed here "
            f"({missing}). Install it with: sudo apt-get install dovecot-imapd dovecot-lmtpd"
        )
    store = store_dir / "email.db"
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
        _remove_store(store)
    except OSError as exc:
        raise fail(
            f"Cannot write the demo's store in {store_dir}: {exc.strerror or exc}. Choose a "
            "writable folder with --store-dir."
        ) from exc

    from ..demo.email_scenario import run_email_demo
    from ..demo.trajectory_printer import TrajectoryPrinter

    model = None
    if config is not None:
        from ..config import build_model, load_config

        if not config.exists():
            raise fail(
                f"There is no {config}. Run `wakeful init` to write one, or leave out --config."
            )
        settings = load_config(config)
        if settings.model is None:
            raise fail(
                f"{config} has no [model] table. Uncomment one (see `wakeful init --print`), or "
                "leave out --config to play the scripted secretary."
            )
        model = build_model(settings.model)

    async def main() -> None:
        result = await run_email_demo(
            store_path=store,
            model=model,
            restart_after=restart_after or None,
            observer=TrajectoryPrinter(out, title="email"),
            on_mail=lambda mail: out.print(
                f"[bold magenta]✉ {escape(mail.name)}[/bold magenta] from {escape(mail.sender)}"
            ),
        )
        out.rule("[bold]afterwards")
        for message in result.told_user:
            out.print(
                f"[bold]told you[/bold] ({escape(str(message['urgency']))}): "
                f"{escape(str(message['text']))}"
            )
        for mailbox, mails in result.mailboxes.items():
            out.print(f"[bold]{escape(mailbox)}[/bold]: {len(mails)} message(s)")
            for mail in mails:
                flags = " ".join(sorted(mail.flags)) or "-"
                out.print(f"  {escape(mail.subject)}  [dim]{escape(flags)}[/dim]")
        out.print(
            f"{result.events} events stored, {result.filtered} kept from the agent by the "
            f"filter; {result.model_calls} model requests; {result.restarts} restart(s), "
            "nothing handled twice."
        )

    anyio.run(main)
    where = shlex.quote(str(store))
    out.print(
        f"The demo's store is {store}. Look inside:\n"
        f"  wakeful events tail --store {where}\n"
        f"  wakeful events tail --filtered --store {where}\n"
        f"  wakeful audit stats --store {where}",
        markup=False,
        highlight=False,
    )


def _remove_store(path: Path) -> None:
    """Remove a demo store left by an earlier run, with its SQLite side files."""
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)


@demo_app.command("web")
def demo_web(
    web_address: Annotated[
        str,
        typer.Option(
            "--web-address",
            help="HOST:PORT of the web console (port 0: any free one). The token is "
            "$WAKEFUL_WEB_TOKEN when set.",
        ),
    ] = "127.0.0.1:8787",
    store_dir: Annotated[
        Path,
        typer.Option(
            "--store-dir",
            help="Where the demo's store (web.db, kept between runs) and its workspace go.",
            file_okay=False,
        ),
    ] = DEFAULT_STORE_DIR,
    quiet: Annotated[bool, typer.Option("--quiet", help="Hide tool calls.")] = False,
) -> None:
    """The web console with a scripted agent: no model or API key. Open the URL it prints and
    type 'card', 'urgent', 'task' or 'clean'; Ctrl-C stops it."""
    from ..channels.console import ConsoleObserver
    from ..demo.console_agent import console_demo_model
    from ..errors import UserError
    from ..runtime.runtime import Runtime
    from .run import WebConsoleOptions, parse_web_address, serve_web_console

    try:
        host, port = parse_web_address(web_address)
    except UserError as exc:
        raise fail(str(exc)) from exc
    workspace = store_dir / "workspace"
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(
            f"Cannot create {workspace}: {exc.strerror}. Choose another --store-dir."
        ) from exc
    options = WebConsoleOptions(host, port, "main", "WAKEFUL_WEB_TOKEN")

    async def main() -> None:
        async with Runtime(
            model=console_demo_model(),
            store_path=store_dir / "web.db",
            workdir=workspace,
            observer=ConsoleObserver(out, verbose=not quiet),
        ) as rt:
            await serve_web_console(rt, options, terminal_session=None)

    out.print(
        f"The scripted demo agent works in {workspace}; its store is {store_dir / 'web.db'}.",
        markup=False,
    )
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return
    except UserError as exc:
        raise fail(str(exc)) from exc
