"""The spreadsheet tools on real .xlsx files, checked by opening them again with openpyxl."""

from __future__ import annotations

import datetime
import stat
from pathlib import Path
from typing import Any

import pytest
from openpyxl import Workbook, load_workbook

from tool_services import call, refused
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.execution.spreadsheets import (
    SPREADSHEET_TOOLS,
    CellRange,
    parse_range,
    spreadsheet_formula,
    spreadsheet_read,
    spreadsheet_write,
)
from wakeful.tools.lint import lint_tool


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    book = Workbook()
    sheet = book.active
    sheet.title = "Data"
    sheet.append(["Name", "Amount", "When"])
    for n in range(1, 251):
        sheet.append([f"item {n}", n * 1.5, datetime.date(2024, 1, 1)])
    sheet["D1"] = "tab\there"
    second = book.create_sheet("Other")
    second["A1"] = "x"
    book.save(root / "book.xlsx")
    (root / "notes.csv").write_text("a,b\n")
    (root / "fake.xlsx").write_text("not a zip\n")
    return root


def test_every_tool_meets_the_description_standard() -> None:
    for t in SPREADSHEET_TOOLS:
        assert lint_tool(t) == [], t.name
    assert spreadsheet_read.spec.annotations.read_only
    assert not spreadsheet_write.spec.annotations.read_only
    assert spreadsheet_formula.spec.annotations.destructive


def test_ranges_parse_strictly() -> None:
    assert parse_range("A1:D20") == CellRange(1, 1, 4, 20)
    assert parse_range("d20:a1") == CellRange(1, 1, 4, 20)
    assert parse_range("XFD1048576").a1 == "XFD1048576"
    for bad in ("A0", "A1:", "1:3", "A:D", "ZZZZ1", "XFE1", "A1048577", "A1:B2:C3", "Sheet1!A1"):
        with pytest.raises(ToolError):
            parse_range(bad)


# --- spreadsheet_read --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_read_shows_a_range_as_a_table(services: Services) -> None:
    result = await call(services, spreadsheet_read, path="book.xlsx", range="A1:C3")
    lines = result.content.split("\n")
    assert lines[0] == "book.xlsx, sheet 'Data' (sheets: Data, Other): A1:C3 shown of A1:C3"
    assert lines[1:5] == [
        "\tA\tB\tC",
        "1\tName\tAmount\tWhen",
        "2\titem 1\t1.5\t2024-01-01T00:00:00",
        "3\titem 2\t3\t2024-01-01T00:00:00",
    ]
    assert result.structured["rows"][1] == ["item 1", 1.5, "2024-01-01T00:00:00"]
    assert result.structured["next_range"] is None


@pytest.mark.anyio
async def test_read_pages_through_long_ranges(services: Services) -> None:
    first = await call(services, spreadsheet_read, path="book.xlsx", sheet="Data")
    data = first.structured
    assert data["range"] == "A1:D251"
    assert "(the sheet's used area)" in first.content
    # 251 rows x 4 columns fit in 2,000 cells, but not in the 9,000 characters of one result.
    assert (data["shown_range"], data["next_range"]) == ("A1:D238", "A239:D251")
    assert '\t"tab\\there"' in first.content.split("\n")[2]  # a tab in a cell is quoted
    wide = await call(services, spreadsheet_read, path="book.xlsx", range="A1:CV1000")
    assert wide.structured["shown_range"] == "A1:CV20"
    assert wide.structured["next_range"] == "A21:CV1000"
    assert "More: pass range='A21:CV1000' for the next rows." in wide.content
    rest = await call(services, spreadsheet_read, path="book.xlsx", range="A241:B1000")
    assert rest.structured["shown_range"] == "A241:B251"
    assert rest.structured["next_range"] is None
    assert "Rows after 251 of the range are empty." in rest.content


@pytest.mark.anyio
async def test_read_shows_formulas_or_their_missing_values(services: Services, root: Path) -> None:
    await call(services, spreadsheet_formula, path="book.xlsx", cell="E2", formula="=B2*2")
    values = await call(services, spreadsheet_read, path="book.xlsx", range="E2")
    assert values.structured["rows"] == [[None]]
    formulas = await call(services, spreadsheet_read, path="book.xlsx", range="E2", formulas=True)
    assert formulas.structured["rows"] == [["=B2*2"]]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "book.xlsx", "range": "A1:ZZ2"}, "702 columns wide"),
        ({"path": "book.xlsx", "range": "A1-B2"}, "is not an A1 range"),
        ({"path": "book.xlsx", "sheet": "data"}, "has no sheet 'data'; its sheets are Data"),
        ({"path": "notes.csv"}, "a .csv is plain text"),
        ({"path": "old.xls"}, "old binary .xls format"),
        ({"path": "fake.xlsx"}, "cannot be opened as an .xlsx workbook"),
        ({"path": "missing.xlsx"}, "There is no file"),
        ({"path": "../book.xlsx"}, "outside the root"),
    ],
)
async def test_read_refuses_bad_input(
    services: Services, arguments: dict[str, Any], expected: str
) -> None:
    assert expected in await refused(services, spreadsheet_read, **arguments)


# --- spreadsheet_write ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_write_changes_cells_and_keeps_the_rest(services: Services, root: Path) -> None:
    (root / "book.xlsx").chmod(0o640)
    result = await call(
        services,
        spreadsheet_write,
        path="book.xlsx",
        cells={"B2": 42, "C3": "007", "F9": True, "A4": None},
    )
    assert result.content.startswith("Wrote 4 cells in sheet 'Data' of book.xlsx (B2: 1.5 → 42;")
    assert "A4: 'item 3' → None" in result.content
    book = load_workbook(root / "book.xlsx")
    sheet = book["Data"]
    assert (sheet["B2"].value, sheet["C3"].value, sheet["F9"].value) == (42, "007", True)
    assert sheet["A4"].value is None and sheet["A5"].value == "item 4"
    assert book["Other"]["A1"].value == "x"
    assert stat.S_IMODE((root / "book.xlsx").stat().st_mode) == 0o640


@pytest.mark.anyio
async def test_write_creates_workbook_and_sheet_only_when_asked(
    services: Services, root: Path
) -> None:
    message = await refused(services, spreadsheet_write, path="new.xlsx", cells={"A1": 1})
    assert "Pass create=true" in message
    message = await refused(services, spreadsheet_write, path="out/new.xlsx", cells={"A1": 1})
    assert "Pass create=true" in message
    result = await call(
        services,
        spreadsheet_write,
        path="out/new.xlsx",
        sheet="Summary",
        cells={"A1": "Total"},
        create=True,
    )
    assert result.structured["created_workbook"] is True
    assert load_workbook(root / "out" / "new.xlsx")["Summary"]["A1"].value == "Total"
    message = await refused(
        services, spreadsheet_write, path="book.xlsx", sheet="Extra", cells={"A1": 1}
    )
    assert "has no sheet 'Extra'" in message
    added = await call(
        services, spreadsheet_write, path="book.xlsx", sheet="Extra", cells={"A1": 1}, create=True
    )
    assert "created the sheet 'Extra'" in added.content
    assert load_workbook(root / "book.xlsx").sheetnames == ["Data", "Other", "Extra"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"cells": {"B2": "=SUM(A1:A3)"}}, "Use spreadsheet_formula"),
        ({"cells": {"B0": 1}}, "is not a cell reference"),
        ({"cells": {"A1:B2": 1}}, "is not a cell reference"),
        ({"cells": {"B2": "x" * 32_768}}, "at most 32,767"),
        ({"cells": {"B2": "bell\x07"}}, "control character U+0007"),
        ({"cells": {}}, "field `cells`"),
        ({"cells": {"B2": [1, 2]}}, "field `cells.B2"),
        ({"cells": {"A1": 1}, "path": "notes.csv"}, "not an .xlsx workbook"),
        ({"cells": {"A1": 1}, "path": "fake.xlsx"}, "cannot be opened"),
        ({"cells": {"A1": 1}, "sheet": "a/b", "create": True}, "sheet names cannot hold"),
    ],
)
async def test_write_refuses_bad_input(
    services: Services, root: Path, arguments: dict[str, Any], expected: str
) -> None:
    before = (root / "book.xlsx").read_bytes()
    assert expected in await refused(
        services, spreadsheet_write, **{"path": "book.xlsx", **arguments}
    )
    assert (root / "book.xlsx").read_bytes() == before


# --- spreadsheet_formula -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_formula_is_stored_as_given_and_not_computed(services: Services, root: Path) -> None:
    result = await call(
        services, spreadsheet_formula, path="book.xlsx", cell="B252", formula="=SUM(B2:B251)"
    )
    assert result.content.startswith(
        "Set B252 in sheet 'Data' of book.xlsx to =SUM(B2:B251) (it was empty); its value is "
        "computed when the file is opened in a spreadsheet application"
    )
    assert result.structured["computed"] is False
    assert load_workbook(root / "book.xlsx")["Data"]["B252"].value == "=SUM(B2:B251)"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"formula": "SUM(B2:B3)"}, "does not start with '='"),
        ({"formula": "=SUM(B2:B3"}, "unbalanced parentheses"),
        ({"formula": "=SUM(B2:B3))"}, "cannot be parsed"),
        ({"formula": '="open string'}, "cannot be parsed"),
        ({"cell": "B2:B3"}, "is not a cell reference"),
        ({"sheet": "Nope"}, "has no sheet 'Nope'"),
        ({"path": "new.xlsx"}, "There is no file"),
        ({"path": "notes.csv"}, "not an .xlsx workbook"),
    ],
)
async def test_formula_refuses_bad_input(
    services: Services, root: Path, arguments: dict[str, Any], expected: str
) -> None:
    before = (root / "book.xlsx").read_bytes()
    full = {"path": "book.xlsx", "cell": "C2", "formula": "=A1", **arguments}
    assert expected in await refused(services, spreadsheet_formula, **full)
    assert (root / "book.xlsx").read_bytes() == before


@pytest.mark.anyio
async def test_formula_with_a_control_character_is_refused(services: Services, root: Path) -> None:
    # Found by test_every_tool's edge values: openpyxl's IllegalCharacterError escaped the tool.
    before = (root / "book.xlsx").read_bytes()
    message = await refused(
        services, spreadsheet_formula, path="book.xlsx", cell="C2", formula="=A1&\x00"
    )
    assert "contains the control character U+0000" in message
    assert (root / "book.xlsx").read_bytes() == before


@pytest.mark.anyio
async def test_workbooks_in_protected_places_are_not_written(
    services: Services, root: Path
) -> None:
    (root / ".git").mkdir()
    (root / "book.xlsx").rename(root / ".git" / "book.xlsx")
    (root / "linked.xlsx").symlink_to(".git/book.xlsx")
    before = (root / ".git" / "book.xlsx").read_bytes()
    cells = {"A1": "x"}
    for path in (".git/new.xlsx", "sub/.git/new.xlsx", "linked.xlsx", ".wakeful/book.xlsx"):
        message = await refused(services, spreadsheet_write, path=path, cells=cells, create=True)
        assert "cannot be written by the agent" in message and "is protected" in message
    message = await refused(
        services, spreadsheet_formula, path="linked.xlsx", cell="A1", formula="=1+1"
    )
    assert message.startswith("'.git/book.xlsx' cannot be written by the agent")
    assert (root / ".git" / "book.xlsx").read_bytes() == before
    assert not (root / "sub").exists() and not (root / ".wakeful").exists()
    # Reading is still allowed.
    result = await call(services, spreadsheet_read, path="linked.xlsx", range="A1:A1")
    assert result.structured["rows"] == [["Name"]]
