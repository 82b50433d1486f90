"""`wakeful cases`: the decisions people made on requests (the learning loop's cases), listed,
shown one by one, and exported as a supervised-learning dataset.

Every command opens the store read-only, so it works while a runtime is writing to it and never
creates, upgrades or changes the file.

The export is JSON Lines, one case per line, oldest first::

    {"case": 12, "decided_at": "2026-12-01T09:30:00+00:00", "session": "main",
     "timed_out": false,
     "input": {"kind": "approval", "tool": "send_email", "request": "{\"to\": …}",
               "reasons": ["…"], "context": "send Bob the Q3 invoice",
               "similar_cases": [{"case": 9, "score": 0.41, "tool": "send_email",
                                  "request": "…", "decision": "approved", "reason": "…"}]},
     "output": {"decision": "approved", "reason": "Bob is our accountant", "answer": null}}

`input` is what was known when the person decided (the similar cases are only those decided
before it); `output` is what they decided: `approved`/`denied` (an approval), `answered` (with
`answer`, the values given) or `declined` (an input request). `timed_out: true` marks a default
applied because nobody answered in time, not a person's judgement.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Final

import typer
from rich.markup import escape
from rich.table import Table

from ..core.records import CaseRecord
from .console import err, fail, out
from .store import DbAliasOption, InspectConfigOption, StoreOption, reading_any_store, store_name

if TYPE_CHECKING:
    from .store import InspectedStore

__all__ = ["cases_app", "parse_case_id", "register"]

cases_app = typer.Typer(
    help="The decisions people made on requests (cases): list, show, export as a dataset.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

_CASE_ID: Final = re.compile(r"^\s*(?:case[ _-]?|#)?(\d{1,18})\s*$", re.IGNORECASE)
_SHORT: Final = 60


def register(app: typer.Typer) -> None:
    """Add the `cases` command group to the `wakeful` app."""
    app.add_typer(cases_app, name="cases")


def parse_case_id(text: str) -> int:
    """The number of a case named as `12`, `case 12`, `case_12` or `#12`."""
    found = _CASE_ID.match(text)
    if found is None or int(found.group(1)) < 1:
        raise typer.BadParameter(
            f"{text!r} is not a case id. Give the case's number as `wakeful cases list` shows "
            "it, e.g. 12 or case_12.",
            param_hint="ID",
        )
    return int(found.group(1))


def _short(text: str, limit: int = _SHORT) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _decision(case: CaseRecord) -> str:
    return f"{case.decision} (timed out)" if case.timed_out else case.decision


def _asked(case: CaseRecord) -> str:
    return f"{case.tool} {case.request}" if case.tool else case.request


def _read_case(reader: InspectedStore, number: int) -> CaseRecord | None:
    from ..store.cases import read_case
    from ..store.reader import StoreReader

    return read_case(reader, number) if isinstance(reader, StoreReader) else reader.case(number)


def _read_recent_cases(reader: InspectedStore, limit: int) -> list[CaseRecord]:
    from ..store.cases import read_recent_cases
    from ..store.reader import StoreReader

    if isinstance(reader, StoreReader):
        return read_recent_cases(reader, limit)
    return reader.recent_cases(limit)


def _read_cases(reader: InspectedStore) -> list[CaseRecord]:
    from ..store.cases import read_cases
    from ..store.reader import StoreReader

    return read_cases(reader) if isinstance(reader, StoreReader) else reader.all_cases()


def _as_json(case: CaseRecord) -> dict[str, Any]:
    return {
        "case": case.number,
        "session": case.session,
        "kind": case.kind,
        "tool": case.tool,
        "request": case.request,
        "reasons": list(case.reasons),
        "context": case.context,
        "decision": case.decision,
        "reason": case.reason,
        "decided_at": case.decided_at,
        "timed_out": case.timed_out,
        "request_id": case.request_id,
        "answer": case.answer,
    }


@cases_app.command("list")
def list_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    db: DbAliasOption = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", help="How many cases to list, newest first.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="One case per line as JSON.")] = False,
) -> None:
    """The newest cases: number, when, decision, what was asked and the person's reason."""
    if limit < 1:
        raise fail(
            f"--limit must be at least 1 (how many of the newest cases to list), got {limit}.",
            code=2,
        )
    with reading_any_store(config, store, db) as reader:
        cases = _read_recent_cases(reader, limit)
        if as_json:
            for case in cases:
                sys.stdout.write(json.dumps(_as_json(case), ensure_ascii=False) + "\n")
            return
        if not cases:
            out.print(
                f"[dim]No cases in {escape(store_name(reader))} yet: a case is recorded each time "
                "a person answers a request (an approval or an input request).[/dim]"
            )
            return
        table = Table(title="Cases (newest first)")
        table.add_column("case", justify="right", no_wrap=True)
        table.add_column("decided (UTC)", no_wrap=True)
        table.add_column("decision", no_wrap=True)
        table.add_column("request")
        table.add_column("reason")
        for case in cases:
            table.add_row(
                str(case.number),
                case.decided_at[:16].replace("T", " "),
                _decision(case),
                escape(_short(_asked(case))),
                escape(_short(case.reason)),
            )
        out.print(table)


@cases_app.command("show")
def show_command(
    case_id: Annotated[
        str, typer.Argument(metavar="ID", help="The case's number: 12, case_12 or #12.")
    ],
    config: InspectConfigOption = None,
    store: StoreOption = None,
    db: DbAliasOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="The case as one JSON object.")] = False,
) -> None:
    """One case whole: the request, its reasons and context, the decision and the reason."""
    number = parse_case_id(case_id)
    with reading_any_store(config, store, db) as reader:
        case = _read_case(reader, number)
        if case is None:
            newest = _read_recent_cases(reader, 1)
            which = f"the newest is case {newest[0].number}" if newest else "it holds no case yet"
            raise fail(
                f"There is no case {number} in {store_name(reader)} ({which}). "
                "`wakeful cases list` shows the cases there."
            )
    if as_json:
        sys.stdout.write(json.dumps(_as_json(case), ensure_ascii=False) + "\n")
        return
    lines = [
        f"[bold]{case.label}[/bold]  {_decision(case)}  {case.decided_at}",
        f"session: {escape(case.session)}   request id: {escape(case.request_id or '-')}",
        f"{case.kind} request: {escape(_asked(case))}",
    ]
    lines += [f"  why a person was asked: {escape(reason)}" for reason in case.reasons]
    lines.append(f"context (the user's last request): {escape(case.context or '-')}")
    if case.answer is not None:
        lines.append(f"answer: {escape(json.dumps(case.answer, ensure_ascii=False))}")
    who = "what was applied" if case.timed_out else "the person's reason"
    lines.append(f"{who}: {escape(case.reason or '-')}")
    for line in lines:
        out.print(line)


@cases_app.command("export")
def export_command(
    config: InspectConfigOption = None,
    store: StoreOption = None,
    db: DbAliasOption = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write to this file instead of standard output.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write every case, oldest first, as a supervised-learning dataset in JSON Lines: "input"
    (request, reasons, context, similar earlier cases) and "output" (decision, reason, answer);
    "timed_out" marks defaults nobody chose."""
    from ..safety.cases import training_examples

    with reading_any_store(config, store, db) as reader:
        cases = _read_cases(reader)

    def write(to: IO[str]) -> int:
        count = 0
        for example in training_examples(cases):
            to.write(json.dumps(example, ensure_ascii=False) + "\n")
            count += 1
        return count

    if output is None:
        write(sys.stdout)
        sys.stdout.flush()
        return
    try:
        with output.open("w", encoding="utf-8") as file:
            count = write(file)
    except OSError as exc:
        raise fail(
            f"Cannot write the export to {output}: {exc.strerror or exc}. Choose a file in an "
            "existing, writable directory."
        ) from exc
    err.print(f"Wrote {count} case(s) to {escape(str(output))}.")
