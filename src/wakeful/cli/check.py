"""`wakeful check-command`: ask the shell command policy about a command line, from a person,
a script (`--json`) or a stream of commands (`--jsonl`, one `{"cmd": …}` object a line).

The policy is :class:`wakeful.safety.commands.CommandPolicy`; its settings come from the
`[safety.commands]` table of a configuration file (`--config`) and `--workspace`.

For one command line the exit status is the verdict, so a script can branch on it without
reading the output: 0 allow, 1 ask, 3 deny (:data:`EXIT_CODES`); 2 is a usage or configuration
error, as for every `wakeful` command. With `--jsonl` the verdicts are in the output and the
status says only whether every line could be read (0) or not (1).
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from pydantic import ValidationError
from rich.markup import escape

from ..safety.commands import CommandDecision, CommandPolicy, PolicySettings
from .console import fail, out

__all__ = ["EXIT_CODES", "load_policy_settings", "register"]

_STYLES: Final = {"allow": "bold green", "ask": "bold yellow", "deny": "bold red"}
EXIT_CODES: Final = {"allow": 0, "ask": 1, "deny": 3}
"""The exit status of `check-command` for one command line, by verdict (2 is a usage error)."""
_JSONL_SHAPE: Final = 'one JSON object a line, e.g. {"cmd": "ls -la"} (optionally with "cwd")'


def register(app: typer.Typer) -> None:
    """Add the `check-command` command to the `wakeful` application."""
    app.command(
        "check-command",
        help="Check a shell command against the command policy: allow, ask or deny, and why. "
        "Exit status: 0 allow, 1 ask, 3 deny, 2 a usage or configuration error; with --jsonl, "
        "0 when every line was read and 1 otherwise.",
    )(check_command)


def load_policy_settings(config: Path | None, workspace: Path | None) -> PolicySettings:
    """Settings from the `[safety.commands]` table of `config` (defaults without one), with
    `workspace` overriding the table's. A relative workspace in the file is relative to it."""
    table: dict[str, Any] = {}
    if config is not None:
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise _fail(
                f"The configuration file {str(config)!r} does not exist. Give the path of a "
                "wakeful.toml, or leave out --config to use the defaults."
            ) from exc
        except tomllib.TOMLDecodeError as exc:
            raise _fail(
                f"The configuration file {str(config)!r} is not valid TOML: {exc}."
            ) from exc
        safety = document.get("safety", {})
        found = safety.get("commands", {}) if isinstance(safety, dict) else {}
        if not isinstance(found, dict):
            raise _fail(
                f"[safety.commands] in {str(config)!r} must be a table, e.g. "
                '[safety.commands] with allowed_hosts = ["github.com"].'
            )
        table = dict(found)
        if isinstance(table.get("workspace"), str):
            table["workspace"] = str(config.parent / Path(table["workspace"]).expanduser())
    if workspace is not None:
        table["workspace"] = str(workspace)
    try:
        return PolicySettings.model_validate(table)
    except ValidationError as exc:
        where = f"[safety.commands] in {str(config)!r}" if config is not None else "The settings"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'table'}: {error['msg']}"
            for error in exc.errors()
        )
        raise _fail(
            f"{where} is not valid: {problems}. The fields are workspace, allowed_hosts, "
            "allow, ask, deny and scratch_dirs."
        ) from exc


def check_command(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            help="The command line, best after `--` (several words are joined with spaces).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help='Print one line {"decision": …, "reasons": […]}.')
    ] = False,
    jsonl: Annotated[
        bool,
        typer.Option(
            "--jsonl",
            help='Read {"cmd": "…"} lines from standard input; print one decision line each.',
        ),
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="The workspace directory.", file_okay=False),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="A wakeful.toml with a [safety.commands] table.", dir_okay=False
        ),
    ] = None,
) -> None:
    """Check one command line, or a stream of them with --jsonl."""
    policy = CommandPolicy(load_policy_settings(config, workspace))
    if jsonl:
        if command:
            raise _fail("Give the commands on standard input with --jsonl, not as arguments.")
        raise typer.Exit(_check_lines(policy))
    if not command:
        raise _fail(
            "Give the command to check, e.g. wakeful check-command --json -- 'rm -rf build', "
            "or use --jsonl to read commands from standard input."
        )
    decision = policy.check(" ".join(command))
    if json_output:
        typer.echo(json.dumps(decision.to_json(), ensure_ascii=False))
    else:
        _print_readable(" ".join(command), decision)
    raise typer.Exit(EXIT_CODES[decision.decision])


def _check_lines(policy: CommandPolicy) -> int:
    bad = False
    for number, line in enumerate(sys.stdin, start=1):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            bad = True
            _echo_error(f"The line is not JSON ({exc.msg}); expected {_JSONL_SHAPE}.", number)
            continue
        cmd = item.get("cmd") if isinstance(item, dict) else None
        cwd = item.get("cwd") if isinstance(item, dict) else None
        if not isinstance(cmd, str):
            bad = True
            _echo_error(f'The line has no "cmd" string; expected {_JSONL_SHAPE}.', number)
            continue
        if cwd is not None and not isinstance(cwd, str):
            bad = True
            _echo_error(f'"cwd" must be a string path; expected {_JSONL_SHAPE}.', number)
            continue
        decision = policy.check(cmd, cwd=Path(cwd) if cwd is not None else None)
        typer.echo(json.dumps(decision.to_json(), ensure_ascii=False))
    return 1 if bad else 0


def _echo_error(message: str, number: int) -> None:
    typer.echo(json.dumps({"error": message, "line": number}, ensure_ascii=False))


def _print_readable(command: str, decision: CommandDecision) -> None:
    style = _STYLES[decision.decision]
    out.print(f"[{style}]{decision.decision}[/{style}]  {escape(command)}")
    for reason in decision.reasons:
        out.print(f"  - {escape(reason)}")


def _fail(message: str) -> typer.Exit:
    return fail(message, 2)
