"""`wakeful cases list/show/export` against real store files, through the real `wakeful` app:
the cases a runtime recorded, read while it runs, and the JSONL dataset they export to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner, Result

from wakeful.cli.app import app
from wakeful.safety.cases import CaseBook, CaseRequest
from wakeful.store.sqlite import Store

INVOICE = CaseRequest(
    "main",
    "approval",
    "send_email",
    '{"to": "bob@acme.com", "subject": "Q3 invoice"}',
    ("send_email cannot be undone.",),
    "send the Q3 invoice to Bob",
)
NEXT_INVOICE = CaseRequest(
    "main",
    "approval",
    "send_email",
    '{"to": "bob@acme.com", "subject": "Q4 invoice"}',
    ("send_email cannot be undone.",),
    "send Bob the Q4 invoice",
)
TABLE = CaseRequest(
    "main", "input", "", "Which date and how many guests?", (), "book a table for Christmas"
)


def cases(*args: str) -> Result:
    """Run `wakeful cases …` in-process; a crash raises instead of passing as exit code 1."""
    return CliRunner().invoke(app, ["cases", *args], env={"COLUMNS": "200"}, catch_exceptions=False)


async def fill(store: Store) -> None:
    book = CaseBook(store.cases)
    await book.record(INVOICE, "approved", "Bob is our accountant", request_id="a3f9")
    await book.record(TABLE, "answered", answer={"date": "2026-12-24", "guests": 4})
    await book.record(
        NEXT_INVOICE, "denied", "no answer within 900 s; applied the default", timed_out=True
    )
    await book.record(NEXT_INVOICE, "approved", "same as case 1")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "wakeful.db"

    async def make() -> None:
        async with await Store.open(path) as store:
            await fill(store)

    anyio.run(make)
    return path


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_list_shows_the_newest_cases_first(db: Path) -> None:
    result = cases("list", "--store", str(db))
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    numbers = [row.replace("│", " ").split()[0] for row in rows]
    assert numbers == ["4", "3", "2", "1"]
    assert "denied (timed out)" in rows[1]
    assert "Bob is our accountant" in rows[3] and "send_email" in rows[3]
    limited = cases("list", "--store", str(db), "--limit", "2", "--json")
    assert [item["case"] for item in lines(limited.stdout)] == [4, 3]
    assert lines(limited.stdout)[1]["timed_out"] is True


def test_list_of_a_store_without_cases_says_how_they_come(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"

    async def make() -> None:
        async with await Store.open(path):
            pass

    anyio.run(make)
    result = cases("list", "--store", str(path))
    assert result.exit_code == 0
    assert "No cases in" in result.stdout and "a person answers a request" in result.stdout


def test_show_prints_one_case_whole(db: Path) -> None:
    for spelling in ("1", "case_1", "case 1", "#1", "CASE-1"):
        result = cases("show", spelling, "--store", str(db))
        assert result.exit_code == 0, (spelling, result.output)
        assert result.stdout.splitlines()[0].startswith("case 1  approved  20")
    text = cases("show", "1", "--store", str(db)).stdout
    assert "request id: a3f9" in text
    assert 'approval request: send_email {"to": "bob@acme.com", "subject": "Q3 invoice"}' in text
    assert "why a person was asked: send_email cannot be undone." in text
    assert "context (the user's last request): send the Q3 invoice to Bob" in text
    assert "the person's reason: Bob is our accountant" in text
    answered = cases("show", "2", "--store", str(db), "--json")
    assert json.loads(answered.stdout)["answer"] == {"date": "2026-12-24", "guests": 4}
    timed_out = cases("show", "3", "--store", str(db)).stdout
    assert "what was applied: no answer within 900 s; applied the default" in timed_out


def test_show_of_an_unknown_or_malformed_id_says_what_exists(db: Path) -> None:
    unknown = cases("show", "99", "--store", str(db))
    assert unknown.exit_code == 1
    assert "There is no case 99 in" in unknown.stderr
    assert "the newest is case 4" in unknown.stderr
    assert "wakeful cases list" in unknown.stderr
    for bad in ("abc", "0", "case_-1", "1; DROP TABLE cases"):
        malformed = cases("show", bad, "--store", str(db))
        assert malformed.exit_code == 2, bad
        assert "is not a case id" in malformed.stderr and "e.g. 12 or case_12" in malformed.stderr


def test_export_writes_one_training_example_per_case(db: Path) -> None:
    result = cases("export", "--store", str(db))
    assert result.exit_code == 0, result.output
    examples = lines(result.stdout)
    assert [e["case"] for e in examples] == [1, 2, 3, 4]
    first, table, timed_out, last = examples
    assert first["input"] == {
        "kind": "approval",
        "tool": "send_email",
        "request": '{"to": "bob@acme.com", "subject": "Q3 invoice"}',
        "reasons": ["send_email cannot be undone."],
        "context": "send the Q3 invoice to Bob",
        "similar_cases": [],
    }
    assert first["output"] == {
        "decision": "approved",
        "reason": "Bob is our accountant",
        "answer": None,
    }
    assert table["output"]["answer"] == {"date": "2026-12-24", "guests": 4}
    assert timed_out["timed_out"] is True and first["timed_out"] is False
    # Only cases decided before it, and never a default nobody chose, are its similar cases.
    assert [s["case"] for s in timed_out["input"]["similar_cases"]] == [1]
    [similar] = last["input"]["similar_cases"]
    assert similar["case"] == 1 and similar["decision"] == "approved"
    assert similar["reason"] == "Bob is our accountant" and similar["score"] >= 0.25


def test_export_to_a_file_and_to_a_path_that_cannot_be_written(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "cases.jsonl"
    written = cases("export", "--store", str(db), "--out", str(out))
    assert written.exit_code == 0, written.output
    assert "Wrote 4 case(s) to" in written.stderr
    assert [e["case"] for e in lines(out.read_text(encoding="utf-8"))] == [1, 2, 3, 4]
    for unwritable in (tmp_path / "no" / "such" / "dir.jsonl", db / "under-a-file.jsonl"):
        failed = cases("export", "--store", str(db), "--out", str(unwritable))
        assert failed.exit_code == 1
        assert f"Cannot write the export to {unwritable}" in failed.stderr
        assert "Choose a file in an existing, writable directory." in failed.stderr


def test_a_missing_store_and_a_bad_limit_are_refused_with_the_fix(tmp_path: Path) -> None:
    missing = cases("list", "--store", str(tmp_path / "nowhere.db"))
    assert missing.exit_code == 1
    assert "There is no wakeful store at" in missing.stderr
    assert "wakeful run" in missing.stderr
    for limit in ("0", "-5"):
        bad = cases("list", "--store", str(tmp_path / "nowhere.db"), "--limit", limit)
        assert bad.exit_code == 2
        assert (
            f"--limit must be at least 1 (how many of the newest cases to list), got {limit}"
            in bad.stderr
        )


def test_the_commands_read_while_the_runtime_holds_the_store(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.db"

    async def while_open() -> None:
        async with await Store.open(path) as store:
            await fill(store)
            listed = cases("list", "--store", str(path), "--json")
            assert [item["case"] for item in lines(listed.stdout)] == [4, 3, 2, 1]
            await CaseBook(store.cases).record(INVOICE, "denied", "changed my mind")
            assert cases("show", "5", "--store", str(path)).exit_code == 0
            assert len(lines(cases("export", "--store", str(path)).stdout)) == 5

    anyio.run(while_open)
