"""Spreadsheet tools over .xlsx files under the root: read a range, write cells, set a formula.

openpyxl reads and writes the files. It does not calculate formulas, and these tools do not
either: a formula is stored as text ("=SUM(B2:B10)") and its value is calculated by the
spreadsheet application that next opens the file (Excel, LibreOffice), which stores the result
with it. Calculating "simple" formulas here would give a second, partial formula engine whose
results could differ from the application's, so the tools say plainly that the value is not
known yet instead. Every write saves the workbook atomically (see :func:`.files.write_atomically`).
"""

from __future__ import annotations

import datetime
import io
import json
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio

# openpyxl ships no type information (types-openpyxl is not a dependency), so its names are Any.
from openpyxl import Workbook, load_workbook  # type: ignore[import-untyped]
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE  # type: ignore[import-untyped]
from openpyxl.formula.tokenizer import Tokenizer, TokenizerError  # type: ignore[import-untyped]
from openpyxl.utils.cell import get_column_letter  # type: ignore[import-untyped]
from openpyxl.utils.exceptions import InvalidFileException  # type: ignore[import-untyped]
from openpyxl.worksheet.worksheet import Worksheet  # type: ignore[import-untyped]
from pydantic import Field

from ...errors import ToolError
from ...safety.beneath import Opened, Placement
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from ..perception.workspace import open_workspace
from .file_targets import (
    MAX_FILE_BYTES,
    open_existing,
    refuse_protected,
    writable_target,
    write_atomically,
)

__all__ = [
    "SPREADSHEET_TOOLS",
    "CellRange",
    "parse_range",
    "spreadsheet_formula",
    "spreadsheet_read",
    "spreadsheet_write",
]

MAX_COLUMN = 16_384  # XFD, Excel's last column
MAX_ROW = 1_048_576
MAX_READ_COLUMNS = 100
MAX_READ_CELLS = 2_000
MAX_WRITE_CELLS = 10_000
MAX_CELL_TEXT = 32_767  # Excel's limit on the text in one cell
TEXT_LIMIT = 9_000
# The `sheet` parameter of the tools that change a workbook (Excel caps a sheet's name at 31).
_SheetName = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=31,
        description="The worksheet's name; the first sheet when omitted, e.g. 'Sheet1'.",
    ),
]
_CELL = r"([A-Za-z]{1,3})([1-9][0-9]{0,6})"
_RANGE = re.compile(rf"^{_CELL}(?::{_CELL})?$")
_ONE_CELL = re.compile(rf"^{_CELL}$")

CellValue = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class CellRange:
    """A rectangle of cells, 1-based and inclusive, as "A1:D20" names it."""

    min_col: int
    min_row: int
    max_col: int
    max_row: int

    @property
    def a1(self) -> str:
        first = f"{get_column_letter(self.min_col)}{self.min_row}"
        last = f"{get_column_letter(self.max_col)}{self.max_row}"
        return first if first == last else f"{first}:{last}"

    @property
    def width(self) -> int:
        return self.max_col - self.min_col + 1


def parse_range(text: str) -> CellRange:
    """ "B2:D20" or "C3" as a CellRange; ToolError naming the rule for anything else."""
    match = _RANGE.match(text.strip())
    if match is None:
        raise ToolError(
            f"The range {text!r} is not an A1 range. Give a cell such as 'B2' or two corners "
            "joined by a colon, such as 'A1:D20' (column letters, then a row number from 1)."
        )
    first_col, first_row = _cell_numbers(match[1], match[2], text)
    last_col, last_row = (
        _cell_numbers(match[3], match[4], text) if match[3] else (first_col, first_row)
    )
    return CellRange(
        min(first_col, last_col),
        min(first_row, last_row),
        max(first_col, last_col),
        max(first_row, last_row),
    )


def parse_cell(text: str) -> tuple[int, int]:
    """ "B2" as (column 2, row 2); ToolError for anything that is not one cell."""
    match = _ONE_CELL.match(text.strip())
    if match is None:
        raise ToolError(
            f"{text!r} is not a cell reference. Name one cell as column letters and a row "
            "number, e.g. 'B2'."
        )
    return _cell_numbers(match[1], match[2], text)


def _cell_numbers(letters: str, digits: str, text: str) -> tuple[int, int]:
    column = 0
    for letter in letters.upper():
        column = column * 26 + ord(letter) - ord("A") + 1
    row = int(digits)
    if column > MAX_COLUMN or row > MAX_ROW:
        raise ToolError(
            f"{text!r} is past the edge of a worksheet, whose last cell is XFD1048576. Use "
            "columns A to XFD and rows 1 to 1048576."
        )
    return column, row


# --- reading -----------------------------------------------------------------------------------


@tool(
    root_paths=("path",),
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"path": "data/budget.xlsx"},
        {"path": "data/budget.xlsx", "sheet": "2024", "range": "A1:D20"},
        {"path": "data/budget.xlsx", "range": "B2:B10", "formulas": True},
    ),
)
async def spreadsheet_read(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The .xlsx file, relative to the root, e.g. 'data/budget.xlsx'.",
        ),
    ],
    sheet: Annotated[
        str | None,
        Field(
            max_length=31,
            description="The worksheet's name; the first sheet when omitted, e.g. 'Sheet1'.",
        ),
    ] = None,
    range: Annotated[
        str | None,
        Field(
            max_length=32,
            description="The cells to show as an A1 range; the sheet's used area when omitted, "
            "e.g. 'A1:D20'.",
        ),
    ] = None,
    formulas: Annotated[
        bool,
        Field(
            description="Show each formula ('=SUM(B2:B9)') instead of its stored value, e.g. true.",
        ),
    ] = False,
) -> ToolResult:
    """Show the cells of one sheet of an .xlsx workbook as a table, a block of rows at a time.

    Use it to look at a spreadsheet's data or formulas before changing it with
    spreadsheet_write or spreadsheet_formula. Values are those saved in the file: a formula's
    value is whatever the spreadsheet application stored when it last calculated; a formula
    written by these tools has no value until the file is opened and saved in such an
    application, and shows as empty (pass formulas=true to see the formula itself).

    It reads .xlsx (and .xlsm) files only; it cannot read .xls, .ods or .csv (read a .csv with
    read_file). It does not accept ranges wider than 100 columns; long ranges are shown in
    blocks of rows, at most 2,000 cells or about 9,000 characters a call.

    Result: a header "budget.xlsx, sheet 'Sheet1' (sheets: Sheet1, 2024): A1:D20 shown of
    A1:D20", then a tab-separated table with the column letters on top and the row number
    first on each line (text holding a tab or line break is shown in JSON quotes), then how to
    get the next rows ("pass range='A21:D500'"). structuredContent holds sheet, sheets, range,
    shown_range, next_range and rows (a list of lists of the exact values; dates as ISO text).

    Cost: 50 ms to a few seconds (openpyxl loads the whole workbook); at most about 9,000
    characters.
    """
    _require_xlsx(path)
    requested = parse_range(range) if range is not None else None

    def read() -> ToolResult:
        with open_workspace(ctx) as root, root.open(path) as found:
            data = _workbook_bytes(found)
        return _read(data, found.shown, sheet, requested, formulas)

    return await anyio.to_thread.run_sync(read)


def _read(
    data: bytes, shown_path: str, sheet: str | None, requested: CellRange | None, formulas: bool
) -> ToolResult:
    book = _load(data, shown_path)
    worksheet = _sheet(book, sheet, shown_path, create=False)
    used = CellRange(1, 1, max(1, worksheet.max_column), max(1, worksheet.max_row))
    area = requested or used
    if area.width > MAX_READ_COLUMNS:
        raise ToolError(
            f"The range {area.a1} is {area.width:,} columns wide; spreadsheet_read shows at most "
            f"{MAX_READ_COLUMNS} columns a call. Read it in narrower ranges, e.g. "
            f"'{get_column_letter(area.min_col)}{area.min_row}:"
            f"{get_column_letter(area.min_col + MAX_READ_COLUMNS - 1)}{area.max_row}'."
        )
    # Rows past the sheet's data are empty; they are not walked one by one.
    last_row = min(area.max_row, max(used.max_row, area.min_row))
    cached = None
    rows: list[list[Any]] = []
    lines = ["\t" + "\t".join(get_column_letter(c) for c in _columns(area))]
    size = len(lines[0])
    row_number = area.min_row
    while row_number <= last_row:
        cells = [worksheet.cell(row=row_number, column=c) for c in _columns(area)]
        values = []
        for cell in cells:
            value = cell.value
            if not formulas and cell.data_type == "f":
                cached = cached or _load(data, shown_path, data_only=True)[worksheet.title]
                value = cached.cell(row=row_number, column=cell.column).value
            values.append(_plain(value))
        line = f"{row_number}\t" + "\t".join(_shown(v) for v in values)
        too_many = (len(rows) + 1) * area.width > MAX_READ_CELLS
        if rows and (too_many or size + len(line) + 1 > TEXT_LIMIT):
            break
        rows.append(values)
        lines.append(line[:TEXT_LIMIT])
        size += len(line) + 1
        row_number += 1
    shown = CellRange(area.min_col, area.min_row, area.max_col, row_number - 1)
    if not rows:
        shown = CellRange(area.min_col, area.min_row, area.max_col, area.min_row)
    next_range = None
    if row_number <= last_row:
        next_range = CellRange(area.min_col, row_number, area.max_col, area.max_row).a1
    names = ", ".join(book.sheetnames)
    header = (
        f"{shown_path}, sheet {worksheet.title!r} (sheets: {names}): "
        f"{shown.a1 if rows else 'no cells'} shown of {area.a1}"
    )
    if requested is None:
        header += " (the sheet's used area)"
    text = header + "\n" + "\n".join(lines)
    if next_range:
        text += f"\n\nMore: pass range={next_range!r} for the next rows."
    if area.max_row > last_row and rows:
        text += f"\n\nRows after {last_row} of the range are empty."
    structured = {
        "path": shown_path,
        "sheet": worksheet.title,
        "sheets": book.sheetnames,
        "range": area.a1,
        "shown_range": shown.a1 if rows else None,
        "next_range": next_range,
        "formulas": formulas,
        "rows": rows,
    }
    return ToolResult(text, structured=structured)


def _columns(area: CellRange) -> list[int]:
    return list(range(area.min_col, area.max_col + 1))


def _plain(value: Any) -> CellValue:
    """A cell's value as JSON can carry it: dates and times as ISO text."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _shown(value: CellValue) -> str:
    if value is None:
        return ""
    if isinstance(value, str) and ("\t" in value or "\n" in value or "\r" in value):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# --- writing -----------------------------------------------------------------------------------


@tool(
    root_paths=("path",),
    annotations=ToolAnnotations(read_only=False, destructive=True, idempotent=True),
    examples=(
        {"path": "data/budget.xlsx", "cells": {"B2": 42, "C3": "text"}},
        {"path": "out/report.xlsx", "sheet": "Summary", "cells": {"A1": "Total"}, "create": True},
        {"path": "data/budget.xlsx", "cells": {"D7": None}},
    ),
)
async def spreadsheet_write(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The .xlsx file, relative to the root, e.g. 'data/budget.xlsx'.",
        ),
    ],
    cells: Annotated[
        dict[str, CellValue],
        Field(
            min_length=1,
            max_length=MAX_WRITE_CELLS,
            description="Values by cell: numbers, text, true/false, or null to clear a cell, "
            "e.g. {'B2': 42, 'C3': 'text'}.",
        ),
    ],
    sheet: _SheetName = None,
    create: Annotated[
        bool,
        Field(
            description="Create the workbook (and its directory) or the named sheet when "
            "missing; without it a missing one is an error, e.g. true.",
        ),
    ] = False,
) -> ToolResult:
    """Write values into cells of an .xlsx workbook and save it.

    Use it to fill in or change data in a spreadsheet; set formulas with spreadsheet_formula.
    Values are stored as given: text stays text (even "007" or "1e5"), numbers stay numbers.
    The workbook is saved atomically after the write.

    It writes .xlsx (and .xlsm) files only and cannot write .xls, .ods or .csv (use write_file
    for a .csv). It does not accept text that starts with "=" (that would be a formula: use
    spreadsheet_formula) or text over 32,767 characters, and writes at most 10,000 cells a
    call. openpyxl keeps the cells, styles and formulas of a workbook it saves, but cannot
    keep charts, images or pivot tables of files made by other applications.

    Result: "Wrote 2 cells in sheet 'Sheet1' of data/budget.xlsx (B2: 41 → 42; C3: empty →
    'text')." plus what was created. structuredContent holds path, sheet, created_workbook,
    created_sheet and changes [{cell, before, after}].

    Cost: 50 ms to a few seconds (openpyxl loads and saves the whole workbook); the result is
    a few hundred characters.
    """
    _require_xlsx(path)
    for reference, value in cells.items():
        parse_cell(reference)
        _check_value(reference, value)

    def change(book: Workbook, worksheet: Worksheet) -> list[dict[str, Any]]:
        changes = []
        for reference, value in cells.items():
            column, row = parse_cell(reference)
            cell = worksheet.cell(row=row, column=column)
            before = _plain(cell.value)
            cell.value = value
            changes.append({"cell": cell.coordinate, "before": before, "after": value})
        return changes

    def write() -> ToolResult:
        with (
            open_workspace(ctx) as root,
            writable_target(root, path, create, create_option="create") as place,
        ):
            return _edit_workbook(place, sheet, create, change, "spreadsheet_write")

    return await anyio.to_thread.run_sync(write)


def _check_value(reference: str, value: CellValue) -> None:
    if not isinstance(value, str):
        return
    if value.startswith("="):
        raise ToolError(
            f"The value for {reference} starts with '=' ({value[:40]!r}), which a spreadsheet "
            "reads as a formula; spreadsheet_write writes plain values. Use spreadsheet_formula "
            f"to set the formula in {reference}."
        )
    if len(value) > MAX_CELL_TEXT:
        raise ToolError(
            f"The text for {reference} is {len(value):,} characters; a spreadsheet cell holds "
            f"at most {MAX_CELL_TEXT:,}. Shorten it or split it over several cells."
        )
    illegal = ILLEGAL_CHARACTERS_RE.search(value)
    if illegal is not None:
        raise ToolError(
            f"The text for {reference} contains the control character "
            f"U+{ord(illegal.group()):04X}, which .xlsx files cannot store. Remove it."
        )


# --- formulas ----------------------------------------------------------------------------------


@tool(
    root_paths=("path",),
    annotations=ToolAnnotations(read_only=False, destructive=True, idempotent=True),
    examples=(
        {"path": "data/budget.xlsx", "cell": "B11", "formula": "=SUM(B2:B10)"},
        {"path": "data/budget.xlsx", "sheet": "2024", "cell": "D2", "formula": "=B2*C2"},
    ),
)
async def spreadsheet_formula(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The existing .xlsx file, relative to the root, e.g. 'data/budget.xlsx'.",
        ),
    ],
    cell: Annotated[
        str,
        Field(min_length=2, max_length=10, description="The cell to set, e.g. 'B11'."),
    ],
    formula: Annotated[
        str,
        Field(
            min_length=2,
            max_length=8192,
            description="The formula, starting with '=', in English function names with commas "
            "between arguments, e.g. '=SUM(B2:B10)'.",
        ),
    ],
    sheet: _SheetName = None,
) -> ToolResult:
    """Put a formula into one cell of an existing .xlsx workbook and save it.

    Use it to add a total, a ratio or a lookup that should stay live in the spreadsheet. The
    formula is stored exactly as given. It is not calculated here: its value is computed when
    the file is next opened in a spreadsheet application (Excel, LibreOffice), and until then
    spreadsheet_read shows the cell as empty unless you pass formulas=true.

    It cannot create a workbook (write a value with spreadsheet_write and create=true first)
    and does not accept a formula that does not start with "=" or whose parentheses or quotes
    do not balance. It does not check that the functions exist; a misspelt one shows as
    #NAME? in the application.

    Result: "Set B11 in sheet 'Sheet1' of data/budget.xlsx to =SUM(B2:B10) (it was 17); its
    value is computed when the file is opened in a spreadsheet application."
    structuredContent holds path, sheet, cell, formula, before and computed (always false).

    Cost: 50 ms to a few seconds (openpyxl loads and saves the whole workbook); the result is
    a few hundred characters.
    """
    _require_xlsx(path)
    column, row = parse_cell(cell)
    _check_formula(formula)

    def change(book: Workbook, worksheet: Worksheet) -> list[dict[str, Any]]:
        target_cell = worksheet.cell(row=row, column=column)
        before = _plain(target_cell.value)
        target_cell.value = formula
        return [{"cell": target_cell.coordinate, "before": before, "after": formula}]

    def write() -> ToolResult:
        with open_workspace(ctx) as root, root.place(path) as place:
            refuse_protected(place)
            existing = open_existing(place)
            if existing is None:
                raise ToolError(
                    f"There is no file {path!r} under the root {str(root.path)!r}; "
                    "spreadsheet_formula changes existing workbooks. Create one with "
                    "spreadsheet_write and create=true, or check the path with find_file."
                )
            existing.close()
            return _edit_workbook(place, sheet, False, change, "spreadsheet_formula")

    return await anyio.to_thread.run_sync(write)


def _check_formula(formula: str) -> None:
    if not formula.startswith("="):
        raise ToolError(
            f"The formula {formula[:60]!r} does not start with '='. Write it as a spreadsheet "
            "would, e.g. '=SUM(B2:B10)'; to store plain text or a number use spreadsheet_write."
        )
    illegal = ILLEGAL_CHARACTERS_RE.search(formula)
    if illegal is not None:
        raise ToolError(
            f"The formula {formula[:60]!r} contains the control character "
            f"U+{ord(illegal.group()):04X}, which .xlsx files cannot store. Remove it."
        )
    try:
        tokens = Tokenizer(formula).items
    except (TokenizerError, ValueError, IndexError) as exc:  # IndexError: an extra ')'
        raise ToolError(
            f"The formula {formula[:60]!r} cannot be parsed: {exc}. Check its quotes and brackets."
        ) from exc
    depth = 0
    for token in tokens:
        if token.subtype == "OPEN":
            depth += 1
        elif token.subtype == "CLOSE":
            depth -= 1
        if depth < 0:
            break
    if depth != 0:
        raise ToolError(
            f"The formula {formula[:60]!r} has unbalanced parentheses ({depth:+d}). Close each "
            "one it opens, e.g. '=SUM(B2:B10)'."
        )


# --- loading and saving ------------------------------------------------------------------------


def _edit_workbook(
    place: Placement,
    sheet: str | None,
    create: bool,
    change: Callable[[Workbook, Worksheet], list[dict[str, Any]]],
    tool_name: str,
) -> ToolResult:
    shown_path = place.shown
    existing = open_existing(place)
    exists = existing is not None
    if existing is not None:
        with existing:
            book = _load(_workbook_bytes(existing), shown_path)
    elif create:
        book = Workbook()
        if sheet is not None:
            assert book.active is not None
            book.active.title = sheet
    else:
        raise ToolError(
            f"There is no workbook {shown_path!r}. Pass create=true to spreadsheet_write to "
            "create it, or check the path with find_file."
        )
    sheets_before = list(book.sheetnames)
    worksheet = _sheet(book, sheet, shown_path, create=create)
    created_sheet = exists and worksheet.title not in sheets_before
    changes = change(book, worksheet)
    buffer = io.BytesIO()
    book.save(buffer)
    data = buffer.getvalue()
    if len(data) > MAX_FILE_BYTES:
        raise ToolError(
            f"The saved workbook would be {len(data):,} bytes, over the {MAX_FILE_BYTES:,}-byte "
            "limit; nothing was written. Write fewer or shorter values."
        )
    write_atomically(place, data)
    where = f"sheet {worksheet.title!r} of {shown_path}"
    made = []
    if not exists:
        made.append("created the workbook")
    if created_sheet:
        made.append(f"created the sheet {worksheet.title!r}")
    made_text = f" ({', '.join(made)})" if made else ""
    listed = "; ".join(
        f"{c['cell']}: {_before_text(c['before'])} → {c['after']!r}" for c in changes[:20]
    )
    if len(changes) > 20:
        listed += f"; and {len(changes) - 20} more"
    structured: dict[str, Any] = {
        "path": shown_path,
        "sheet": worksheet.title,
        "created_workbook": not exists,
        "created_sheet": created_sheet,
    }
    if tool_name == "spreadsheet_formula":
        (only,) = changes
        text = (
            f"Set {only['cell']} in {where} to {only['after']} (it was "
            f"{_before_text(only['before'])}); its value is computed when the file is opened "
            "in a spreadsheet application, not by this tool."
        )
        structured |= {
            "cell": only["cell"],
            "formula": only["after"],
            "before": only["before"],
            "computed": False,
        }
    else:
        count = len(changes)
        text = f"Wrote {count} cell{'' if count == 1 else 's'} in {where}{made_text} ({listed})."
        structured["changes"] = changes
    return ToolResult(text, structured=structured)


def _before_text(value: Any) -> str:
    return "empty" if value is None else repr(value)


def _require_xlsx(path: str) -> None:
    suffix = Path(path).suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        return
    advice = {
        ".xls": "the old binary .xls format cannot be read; save it as .xlsx in a spreadsheet "
        "application first",
        ".csv": "a .csv is plain text: use read_file, write_file or edit_file",
        ".ods": "save the OpenDocument file as .xlsx first",
    }.get(suffix, "give the path of an .xlsx file")
    raise ToolError(
        f"{path!r} is not an .xlsx workbook; the spreadsheet tools work on .xlsx (and .xlsm) "
        f"files only: {advice}."
    )


def _workbook_bytes(found: Opened) -> bytes:
    """The bytes of a workbook opened beneath the root (openpyxl reads them, never the path)."""
    found.regular_file(
        limit=MAX_FILE_BYTES,
        not_regular="{shown!r} is not a regular file; the spreadsheet tools open .xlsx files. "
        "Give the path of a workbook.",
        too_big="{shown} is {size:,} bytes, over the {limit:,}-byte limit of the spreadsheet "
        "tools. Work on it with a program in the interpreter instead.",
    )
    return found.read_bytes()


def _load(data: bytes, shown_path: str, *, data_only: bool = False) -> Workbook:
    keep_vba = shown_path.lower().endswith(".xlsm")
    try:
        return load_workbook(io.BytesIO(data), data_only=data_only, keep_vba=keep_vba)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, OSError) as exc:
        raise ToolError(
            f"{shown_path} cannot be opened as an .xlsx workbook ({type(exc).__name__}: {exc}). "
            "Check that it really is an .xlsx file, not a renamed .xls or .csv."
        ) from exc


def _sheet(book: Workbook, sheet: str | None, shown_path: str, *, create: bool) -> Worksheet:
    if sheet is None:
        worksheet = book.worksheets[0] if book.worksheets else None
        if worksheet is None:
            raise ToolError(f"{shown_path} has no worksheets. Name a sheet and pass create=true.")
        return worksheet
    if sheet in book.sheetnames:
        found = book[sheet]
        if not isinstance(found, Worksheet):
            raise ToolError(
                f"{sheet!r} in {shown_path} is a chart sheet, which has no cells. Name a "
                f"worksheet: {', '.join(book.sheetnames)}."
            )
        return found
    if create:
        if re.search(r"[\[\]:*?/\\]", sheet):
            raise ToolError(
                f"The sheet name {sheet!r} contains one of [ ] : * ? / \\, which sheet names "
                "cannot hold. Choose another name."
            )
        return book.create_sheet(sheet)
    raise ToolError(
        f"{shown_path} has no sheet {sheet!r}; its sheets are {', '.join(book.sheetnames)}. "
        "Use one of those names (they are case-sensitive), or pass create=true to "
        "spreadsheet_write to add the sheet."
    )


SPREADSHEET_TOOLS: tuple[Tool, ...] = (spreadsheet_read, spreadsheet_write, spreadsheet_formula)
"""The spreadsheet tools: read a range, write values, set a formula."""
