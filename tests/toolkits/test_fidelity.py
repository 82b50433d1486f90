"""The fidelity suite: awkward files read through read_file and written back byte for byte.

Each case of the corpus is read with the perception `read_file` (its line-number prefixes,
header and notes stripped, long lines followed through byte_offset reads), written back with
`write_file`, and compared with the original bytes. Edits with `edit_file` must change exactly
the bytes they name. Everything runs twice: with the tools called in-process, and through a real
MCP client on the in-memory transport, so JSON on the wire is covered too.

The failure this guards against: a tool that turned curly quotes into straight ones made every
later edit of the file fail to match.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from perception_tree import text_of

from mcp import Client
from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.mcp.bridge import build_server
from wakeful.toolkits.execution.files import FILE_EDIT_TOOLS
from wakeful.toolkits.perception.read_file import read_file
from wakeful.toolkits.perception.shown_text import substitution_note
from wakeful.tools.spec import ToolContext

Call = Callable[..., Awaitable[tuple[str, dict[str, Any], bool]]]

TEXT_CASES: dict[str, bytes] = {
    "curly_quotes": "“Curly” quotes, ‘single’ ones, it’s „low“ «guillemets»\n".encode(),
    "crlf": b"one\r\ntwo\r\nthree\r\n",
    "mixed_endings": b"lf\ncrlf\r\nlone cr\rstill line three\nend\r\n",
    "lone_cr_only": b"classic\rmac\rendings\r",
    "tabs_and_trailing": b"\tindented\t\n  trailing spaces   \n\t\t\n    \n",
    "no_final_newline": b"first\nlast line without a newline",
    "blank_lines": b"\n\n\n",
    "empty": b"",
    "emoji": "😀 👩‍👩‍👧‍👦 🏳️‍🌈 🧑‍💻 astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \U0001f9ea\n".encode(),
    "combining": "e\u0301 n\u0303 a\u0308\u0304 (decomposed, not NFC)\n".encode(),
    "bom": "\ufeffBOM first\r\nsecond\r\n".encode(),
    "other_whitespace": "vt\x0b ff\x0c nbsp\u00a0 ls\u2028 ps\u2029 zw\u200b\n".encode(),
    "non_ascii": "Grüße, 你好, Привет, مرحبا, שלום\n".encode(),
    "long_line": b"head\n" + "abc“é😀".encode() * 40_000 + b"\ntail\n",
    "long_line_no_newline": b"x" * 200_000,
}

# Bytes read_file cannot show as they are: NUL (shown ␀) and bytes that are not UTF-8 (shown �).
UNSHOWABLE_CASES: dict[str, tuple[bytes, int, int]] = {
    "latin1": (b"caf\xe9 au lait\nsecond line\n", 0, 1),
    "nul": (b"a\x00b\nline two\n", 1, 0),
    "bad_utf8_and_nul": (b"ok\r\n\xff\xfe bad \x00 here\r\nlast", 1, 2),
}


@pytest.fixture(params=["in-process", "mcp"])
async def call(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Call]:
    """Call a tool by name, in-process or through an MCP client: (text, structured, is_error)."""
    root = tmp_path / "root"
    root.mkdir()
    tools = (*FILE_EDIT_TOOLS, read_file)
    if request.param == "in-process":
        by_name = {t.name: t for t in tools}
        async with tool_services(root) as (services, _events):

            async def direct(name: str, **arguments: Any) -> tuple[str, dict[str, Any], bool]:
                ctx = ToolContext("s", "c", name, services)
                try:
                    result = await by_name[name].run(arguments, ctx)
                except ToolError as exc:
                    return str(exc), {}, True
                return result.content, result.structured or {}, result.is_error

            yield direct
    else:
        async with Client(build_server("test", tools, workdir=root)) as client:

            async def remote(name: str, **arguments: Any) -> tuple[str, dict[str, Any], bool]:
                result = await client.call_tool(name, arguments)
                return text_of(result), result.structured_content or {}, bool(result.is_error)

            yield remote


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "root"


async def read_back(call: Call, path: str) -> str:
    """The file's text as read_file shows it, reassembled from its numbered lines."""
    pieces: list[str] = []
    offset = 0
    while True:
        text, data, error = await call("read_file", path=path, offset=offset, limit=2000)
        assert not error, text
        if data["total_lines"] == 0:
            return ""
        rows = numbered_rows(text)
        if data["next_byte_offset"] is not None:  # the last row is a cut line
            *complete, (cut_label, partial) = rows
            pieces += [row + "\n" for _, row in complete]
            pieces.append(partial)
            rest, more = await read_rest_of_line(call, path, data["next_byte_offset"])
            pieces.append(rest)
            if not more:
                return "".join(pieces)
            offset = cut_label
            continue
        pieces += [row + "\n" for _, row in rows]
        if data["next_offset"] is None:
            if data["ends_with_newline"] is False:
                pieces[-1] = pieces[-1].removesuffix("\n")
            return "".join(pieces)
        offset = data["next_offset"]


def numbered_rows(text: str) -> list[tuple[int, str]]:
    rows = []
    for line in text.split("\n")[1:]:
        if not line:
            break
        number, content = line.split("\t", 1)
        rows.append((int(number), content))
    return rows


async def read_rest_of_line(call: Call, path: str, byte_offset: int) -> tuple[str, bool]:
    """The rest of a cut line through raw byte_offset reads: (its text and newline, more lines)."""
    pieces = []
    while True:
        text, data, error = await call("read_file", path=path, byte_offset=byte_offset)
        assert not error, text
        notes = []
        if data["next_byte_offset"] is not None:
            notes.append(f"More: pass byte_offset={data['end_byte']} for the next bytes.")
        note = substitution_note(data["nul_bytes"], data["invalid_utf8_bytes"])
        if note:
            notes.append(note)
        body = text.split("\n", 1)[1]
        suffix = "\n\n" + "\n".join(notes) if notes else ""
        assert body.endswith(suffix)
        body = body[: len(body) - len(suffix)]
        if "\n" in body:
            line_end = body.index("\n") + 1
            more = data["start_byte"] + len(body[:line_end].encode()) < data["file_bytes"]
            return "".join(pieces) + body[:line_end], more
        pieces.append(body)
        if data["next_byte_offset"] is None:
            return "".join(pieces), False
        byte_offset = data["next_byte_offset"]


# --- (1) read with read_file, write back with write_file ------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("case", TEXT_CASES)
async def test_reading_and_writing_back_keeps_every_byte(call: Call, root: Path, case: str) -> None:
    original = TEXT_CASES[case]
    (root / "original.txt").write_bytes(original)
    shown = await read_back(call, "original.txt")
    assert shown.encode() == original  # read_file itself shows the text as it is
    text, data, error = await call("write_file", path="copy.txt", content=shown)
    assert not error, text
    assert (root / "copy.txt").read_bytes() == original
    assert data["bytes_written"] == len(original)
    # Writing it over the original again is a no-op, byte for byte.
    await call("write_file", path="original.txt", content=shown)
    assert (root / "original.txt").read_bytes() == original


@pytest.mark.anyio
@pytest.mark.parametrize("case", UNSHOWABLE_CASES)
async def test_unshowable_bytes_are_reported_and_base64_writes_them_back_exactly(
    call: Call, root: Path, case: str
) -> None:
    original, nul, invalid = UNSHOWABLE_CASES[case]
    (root / "original.bin").write_bytes(original)
    text, data, _ = await call("read_file", path="original.bin")
    assert (data["nul_bytes"], data["invalid_utf8_bytes"]) == (nul, invalid)
    assert substitution_note(nul, invalid).removesuffix(".") in text
    shown = await read_back(call, "original.bin")
    assert shown.count("␀") == nul and shown.count("�") == invalid

    # The marks are not the bytes: written back as text they stay marks, and the result says so.
    text, _, error = await call("write_file", path="as_text.txt", content=shown)
    assert not error
    assert (root / "as_text.txt").read_bytes() == shown.encode() != original
    assert "if you meant those bytes, write the file with content_base64" in text

    encoded = base64.b64encode(original).decode()
    text, data, error = await call("write_file", path="copy.bin", content_base64=encoded)
    assert not error, text
    assert (root / "copy.bin").read_bytes() == original


@pytest.mark.anyio
async def test_an_edit_elsewhere_leaves_nul_and_non_utf8_bytes_intact(
    call: Call, root: Path
) -> None:
    original = b"caf\xe9\r\nkeep \x00 this\r\nchange me\r\n\xff tail"
    (root / "f.txt").write_bytes(original)
    text, _, error = await call("edit_file", path="f.txt", old="change me", new="changed ✓")
    assert not error, text
    expected = original.replace(b"change me", "changed ✓".encode())
    assert (root / "f.txt").read_bytes() == expected


@pytest.mark.anyio
async def test_an_edit_through_the_marks_is_refused_with_the_reason(call: Call, root: Path) -> None:
    original = b"caf\xe9 au lait\nkeep \x00 this\n"
    (root / "f.txt").write_bytes(original)
    shown = await read_back(call, "f.txt")
    line = shown.split("\n")[0]  # "caf� au lait", as read_file showed it
    text, _, error = await call("edit_file", path="f.txt", old=line, new="coffee")
    assert error
    assert "would match 1 place if its ␀ and � marks stood for" in text
    assert "never writes those marks" in text
    text, _, error = await call("edit_file", path="f.txt", old="keep", new="keep ␀")
    assert error and "new contains ␀ marks that old does not" in text
    assert (root / "f.txt").read_bytes() == original
    # Editing around the marked bytes works and keeps them.
    text, _, error = await call("edit_file", path="f.txt", old=" au lait", new=" noir")
    assert not error, text
    assert (root / "f.txt").read_bytes() == b"caf\xe9 noir\nkeep \x00 this\n"


# --- (2) edit_file changes exactly the bytes it names ---------------------------------------------


@pytest.mark.anyio
async def test_replacing_a_curly_quoted_phrase_in_a_crlf_file(call: Call, root: Path) -> None:
    original = "Title: “Draft” copy\r\nBody: ‘one’\tand “two”\r\nEnd\r\n".encode()
    (root / "doc.txt").write_bytes(original)
    text, data, error = await call(
        "edit_file", path="doc.txt", old="“Draft” copy\r\n", new="“Final” — it’s done\r\n"
    )
    assert not error, text
    old_bytes = b"\xe2\x80\x9cDraft\xe2\x80\x9d copy\r\n"
    new_bytes = b"\xe2\x80\x9cFinal\xe2\x80\x9d \xe2\x80\x94 it\xe2\x80\x99s done\r\n"
    at = original.index(old_bytes)
    expected = original[:at] + new_bytes + original[at + len(old_bytes) :]
    assert (root / "doc.txt").read_bytes() == expected
    assert data["notes"] == []  # CRLF in, CRLF out: nothing mixed
    assert "-Title: “Draft” copy\r\n+Title: “Final” — it’s done\r\n" in data["diff"]


@pytest.mark.anyio
async def test_text_copied_from_read_file_matches_and_straight_quotes_do_not(
    call: Call, root: Path
) -> None:
    original = "say “hello”\r\n\tit’s here\r\n".encode()
    (root / "q.txt").write_bytes(original)
    text, _, error = await call("edit_file", path="q.txt", old='say "hello"', new="x")
    assert error and "The file has curly quotes (“ ” ‘ ’) where old has straight ones" in text
    assert (root / "q.txt").read_bytes() == original
    copied = numbered_rows((await call("read_file", path="q.txt"))[0])
    old = copied[0][1] + "\n" + copied[1][1]  # as read_file shows them: "\r" kept, "\n" between
    text, _, error = await call("edit_file", path="q.txt", old=old, new="“bye”\r\n\tit’s gone\r")
    assert not error, text
    assert (root / "q.txt").read_bytes() == "“bye”\r\n\tit’s gone\r\n".encode()


@pytest.mark.anyio
async def test_mixed_line_endings_from_an_edit_are_noted_not_converted(
    call: Call, root: Path
) -> None:
    (root / "w.txt").write_bytes(b"a\r\nb\r\n")
    text, _, error = await call("edit_file", path="w.txt", old="b", new="b\nc")
    assert not error
    assert (root / "w.txt").read_bytes() == b"a\r\nb\nc\r\n"
    assert "the file now has mixed line endings" in text


# --- (3) the same through JSON: long and awkward content over the wire ----------------------------


@pytest.mark.anyio
async def test_write_then_read_of_every_case_agrees(call: Call, root: Path) -> None:
    for case, original in TEXT_CASES.items():
        text, _, error = await call("write_file", path=f"{case}.txt", content=original.decode())
        assert not error, text
        assert (root / f"{case}.txt").read_bytes() == original, case
        assert (await read_back(call, f"{case}.txt")).encode() == original, case
