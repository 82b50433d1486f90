"""write_file and edit_file, called as the runtime calls them, on a real directory."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tool_services import call, refused
from wakeful.services import Services
from wakeful.toolkits.execution.files import FILE_EDIT_TOOLS, MAX_FILE_BYTES, edit_file, write_file
from wakeful.tools.lint import lint_tool


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    (root / "escape_dir").symlink_to(outside)
    return root


def test_every_tool_meets_the_description_standard() -> None:
    for t in FILE_EDIT_TOOLS:
        assert lint_tool(t) == [], t.name
    assert write_file.spec.annotations.destructive and write_file.spec.annotations.idempotent
    assert edit_file.spec.annotations.destructive and not edit_file.spec.annotations.idempotent
    assert not any(t.spec.annotations.read_only for t in FILE_EDIT_TOOLS)


# --- write_file ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_write_creates_a_file_with_exactly_the_bytes_sent(
    services: Services, root: Path
) -> None:
    content = "“Curly” ‘quotes’\r\n\ttab  \rlone CR\nno final newline 😀"
    result = await call(services, write_file, path="notes.txt", content=content)
    assert (root / "notes.txt").read_bytes() == content.encode()
    assert result.structured["created"] is True and result.structured["replaced"] is False
    assert result.structured["bytes_written"] == len(content.encode())
    assert result.content.startswith(f"Wrote {len(content.encode())} bytes to notes.txt")
    assert "mixed line endings (1 CRLF, 1 LF, 1 lone CR)" in result.content


@pytest.mark.anyio
async def test_write_replaces_a_file_keeps_its_mode_and_says_so(
    services: Services, root: Path
) -> None:
    target = root / "run.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    result = await call(services, write_file, path="run.sh", content="new\r\n")
    assert target.read_bytes() == b"new\r\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert result.structured["replaced"] is True
    assert "replaced its 4 bytes" in result.content
    assert "had LF line endings and the new content has CRLF" in result.content
    assert sorted(p.name for p in root.iterdir()) == ["escape.txt", "escape_dir", "run.sh"]  # noqa: ASYNC240


@pytest.mark.anyio
async def test_write_twice_with_the_same_content_changes_nothing(
    services: Services, root: Path
) -> None:
    await call(services, write_file, path="same.txt", content="x\n")
    before = (root / "same.txt").stat().st_mtime_ns
    result = await call(services, write_file, path="same.txt", content="x\n")
    assert "already held exactly these bytes" in result.content
    assert (root / "same.txt").stat().st_mtime_ns == before


@pytest.mark.anyio
async def test_overwrite_false_refuses_an_existing_file(services: Services, root: Path) -> None:
    (root / "keep.txt").write_text("keep\n")
    message = await refused(services, write_file, path="keep.txt", content="x", overwrite=False)
    assert "already exists (5 bytes) and overwrite is false" in message
    assert (root / "keep.txt").read_text() == "keep\n"
    await call(services, write_file, path="fresh.txt", content="x", overwrite=False)
    assert (root / "fresh.txt").read_text() == "x"


@pytest.mark.anyio
async def test_missing_directories_need_create_dirs(services: Services, root: Path) -> None:
    message = await refused(services, write_file, path="a/b/c.txt", content="x")
    assert "'a/b' does not exist" in message and "create_dirs=true" in message
    assert not (root / "a").exists()
    result = await call(services, write_file, path="a/b/c.txt", content="x", create_dirs=True)
    assert (root / "a" / "b" / "c.txt").read_text() == "x"
    assert "created it, with its missing directories" in result.content


@pytest.mark.anyio
async def test_base64_content_writes_bytes_text_cannot_carry(
    services: Services, root: Path
) -> None:
    data = b"caf\xe9 \x00\x01\xff"
    encoded = base64.b64encode(data).decode()
    result = await call(services, write_file, path="blob.bin", content_base64=encoded)
    assert (root / "blob.bin").read_bytes() == data
    assert "1 NUL and 2 non-UTF-8 bytes" in result.content


@pytest.mark.anyio
async def test_base64_with_a_character_outside_ascii_is_refused(
    services: Services, root: Path
) -> None:
    # Found by test_every_tool's edge values: b64decode's ValueError escaped the tool.
    message = await refused(services, write_file, path="blob.bin", content_base64="AAEC/w==é")
    assert "content_base64 is not valid base64" in message
    assert not (root / "blob.bin").exists()


@pytest.mark.anyio
async def test_written_marks_are_reported_not_converted(services: Services, root: Path) -> None:
    result = await call(services, write_file, path="m.txt", content="a ␀ b � c\n")
    assert (root / "m.txt").read_bytes() == "a ␀ b � c\n".encode()
    assert "1 ␀ character (U+2400), written as that character" in result.content
    assert "content_base64" in result.content


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "x.txt"}, "neither of content and content_base64"),
        ({"path": "x.txt", "content": "a", "content_base64": "YQ=="}, "both of content"),
        ({"path": "x.txt", "content_base64": "not base64!"}, "not valid base64"),
        (
            {"path": "x.txt", "content": "bad \ud800 surrogate"},
            "unable to parse raw data as a unicode string",
        ),
        ({"path": "../x.txt", "content": "a"}, "leads outside the root"),
        ({"path": "../nowhere/x.txt", "content": "a"}, "leads outside the root"),
        ({"path": "escape.txt", "content": "a"}, "symlink"),
        ({"path": "escape_dir/new.txt", "content": "a"}, "symlink"),
        ({"path": "sub", "content": "a"}, "is a directory"),
        ({"path": ".", "content": "a"}, "is a directory"),
        ({"path": "file.txt/new.txt", "content": "a"}, "is a file"),
        ({"path": "", "content": "a"}, "field `path`"),
        ({"path": "x.txt", "content": "a", "mode": "w"}, "not a parameter"),
    ],
)
async def test_write_refuses_bad_input(
    services: Services, root: Path, arguments: dict[str, Any], expected: str
) -> None:
    (root / "sub").mkdir()
    (root / "file.txt").write_text("f\n")
    message = await refused(services, write_file, **arguments)
    assert expected in message
    assert not (root / "x.txt").exists()
    assert (root.parent / "outside" / "secret.txt").read_text() == "secret\n"
    assert not (root.parent / "outside" / "new.txt").exists()


@pytest.mark.anyio
async def test_write_refuses_devices_and_oversized_content(services: Services, root: Path) -> None:
    os.mkfifo(root / "pipe")
    assert "not a regular file" in await refused(services, write_file, path="pipe", content="a")
    big = base64.b64encode(b"x" * (MAX_FILE_BYTES + 1)).decode()
    message = await refused(services, write_file, path="big.bin", content_base64=big)
    assert f"{MAX_FILE_BYTES + 1:,} bytes" in message and "at most" in message


@pytest.mark.anyio
async def test_write_into_a_symlinked_file_inside_the_root_writes_its_target(
    services: Services, root: Path
) -> None:
    (root / "real.txt").write_text("old\n")
    (root / "link.txt").symlink_to(root / "real.txt")
    result = await call(services, write_file, path="link.txt", content="new\n")
    assert (root / "link.txt").is_symlink()
    assert (root / "real.txt").read_text() == "new\n"
    assert result.structured["path"] == "real.txt"


@pytest.mark.anyio
async def test_write_reports_diagnostics_of_python(services: Services, root: Path) -> None:
    result = await call(services, write_file, path="app.py", content="print(result)\n")
    check = result.structured["check"]
    assert check["checker"] == "ruff"
    assert check["diagnostics"] == [
        {"line": 1, "column": 7, "code": "F821", "message": "Undefined name `result`"}
    ]
    assert "Check: ruff: 1 problem: line 1 col 7 F821 Undefined name `result`" in result.content
    clean = await call(services, write_file, path="ok.py", content="print(1)\n")
    assert "Check: ruff: no problems" in clean.content


# --- edit_file -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_edit_replaces_one_match_and_returns_a_diff(services: Services, root: Path) -> None:
    lines = [f"line {i}\n" for i in range(1, 21)]
    (root / "f.txt").write_text("".join(lines))
    result = await call(services, edit_file, path="f.txt", old="line 10\n", new="ten\n")
    lines[9] = "ten\n"
    assert (root / "f.txt").read_text() == "".join(lines)
    assert result.structured["replacements"] == 1 and result.structured["lines"] == [10]
    diff = result.structured["diff"]
    assert "@@ -7,7 +7,7 @@\n line 7\n line 8\n line 9\n-line 10\n+ten\n line 11\n" in diff
    assert result.content.startswith("Edited f.txt: 1 replacement (line 10); 151 → 147 bytes.")


@pytest.mark.anyio
async def test_edit_refuses_an_ambiguous_match_and_names_the_lines(
    services: Services, root: Path
) -> None:
    (root / "f.py").write_text("x = 1\ny = 2\nx = 1\n")
    message = await refused(services, edit_file, path="f.py", old="x = 1", new="x = 3")
    assert "old occurs 2 times in f.py (starting on lines 1, 3)" in message
    assert "replace_all=true" in message
    assert (root / "f.py").read_text() == "x = 1\ny = 2\nx = 1\n"
    result = await call(
        services, edit_file, path="f.py", old="x = 1", new="x = 3", replace_all=True
    )
    assert (root / "f.py").read_text() == "x = 3\ny = 2\nx = 3\n"
    assert result.structured["lines"] == [1, 3]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "old", "hint"),
    [
        (b"a\r\nb\r\n", "a\nb", "CRLF line endings where old has LF"),
        (b"a\nb\n", "a\r\nb", "LF line endings where old has CRLF"),
        (b'say "hi"\n', "say “hi”", "curly quotes"),
        ("say “hi”\n".encode(), 'say "hi"', "The file has curly quotes"),
        (b"def f():\n    pass\n", "     1\tdef f():\n     2\t    pass", "line-number prefixes"),
        (b"x = 1\ny = 2\n", "x = 1  \ny", "trailing whitespace"),
        (b"hello\n", "goodbye", "copy old from it"),
    ],
)
async def test_edit_explains_a_near_miss_without_guessing(
    services: Services, root: Path, content: bytes, old: str, hint: str
) -> None:
    (root / "f.txt").write_bytes(content)
    message = await refused(services, edit_file, path="f.txt", old=old, new="z")
    assert "old was not found in f.txt, so nothing was changed." in message
    assert hint in message
    assert (root / "f.txt").read_bytes() == content


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "f.txt", "old": "a", "new": "a"}, "the same text"),
        ({"path": "f.txt", "old": "", "new": "b"}, "field `old`"),
        (
            {"path": "f.txt", "old": "a", "new": "\udcff"},
            "unable to parse raw data as a unicode string",
        ),
        ({"path": "missing.txt", "old": "a", "new": "b"}, "There is no file"),
        ({"path": "escape.txt", "old": "secret", "new": "b"}, "symlink"),
        ({"path": "../outside/secret.txt", "old": "secret", "new": "b"}, "outside the root"),
        ({"path": "sub", "old": "a", "new": "b"}, "is a directory"),
    ],
)
async def test_edit_refuses_bad_input(
    services: Services, root: Path, arguments: dict[str, Any], expected: str
) -> None:
    (root / "f.txt").write_text("a\n")
    (root / "sub").mkdir()
    assert expected in await refused(services, edit_file, **arguments)
    assert (root / "f.txt").read_text() == "a\n"
    assert (root.parent / "outside" / "secret.txt").read_text() == "secret\n"


@pytest.mark.anyio
async def test_edit_notes_mixed_line_endings_without_converting(
    services: Services, root: Path
) -> None:
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    result = await call(services, edit_file, path="w.txt", old="two", new="two\nthree")
    assert (root / "w.txt").read_bytes() == b"one\r\ntwo\nthree\r\n"
    assert "The file uses CRLF line endings and your new text has 1 LF" in result.content
    assert "mixed line endings" in result.content


@pytest.mark.anyio
async def test_edit_keeps_mode_and_reports_diagnostics(services: Services, root: Path) -> None:
    target = root / "data.json"
    target.write_text('{"a": 1}\n')
    target.chmod(0o640)
    result = await call(services, edit_file, path="data.json", old='"a": 1', new='"a": ')
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert result.structured["check"]["checker"] == "json"
    (problem,) = result.structured["check"]["diagnostics"]
    assert problem["line"] == 1 and problem["code"] == "syntax"


@pytest.mark.anyio
async def test_a_huge_diff_is_cut_visibly(services: Services, root: Path) -> None:
    (root / "big.txt").write_text("".join(f"row {i}\n" for i in range(5000)))
    result = await call(services, edit_file, path="big.txt", old="row", new="ROW", replace_all=True)
    diff = result.structured["diff"]
    assert len(diff) <= 8_000
    assert "more characters cut at the 8,000-character limit" in diff
    assert (root / "big.txt").read_text().count("ROW") == 5000
    assert "and 4980 more" in result.content


@pytest.mark.anyio
async def test_an_edit_deep_in_a_file_numbers_its_hunk_by_file_lines(
    services: Services, root: Path
) -> None:
    (root / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 1001)))
    result = await call(services, edit_file, path="long.txt", old="\n900\n", new="\nnine\n")
    assert "@@ -897,7 +897,7 @@\n 897\n 898\n 899\n-900\n+nine\n 901\n" in result.structured["diff"]


# --- protected paths -----------------------------------------------------------------------------


@pytest.fixture
def project(root: Path) -> Path:
    """A root with what the host trusts in it: a .git folder, the runtime's state and config."""
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".wakeful").mkdir()
    (root / "wakeful.toml").write_text("[sandbox]\n")
    (root / "a").mkdir()
    (root / "vendor" / "lib" / ".git").mkdir(parents=True)
    (root / "git_link").symlink_to(".git")
    (root / "config_link.toml").symlink_to(root / "wakeful.toml")
    return root


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under the root with its bytes (None for directories and links)."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        found[relative] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return found


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("path", "shown", "protected"),
    [
        (".git/config", ".git/config", ".git"),
        (".git/./hooks/pre-commit", ".git/hooks/pre-commit", ".git"),
        ("a/../.git/config", ".git/config", ".git"),
        (".GIT/config", ".GIT/config", ".git"),
        ("git_link/hooks/post-checkout", ".git/hooks/post-checkout", ".git"),
        ("vendor/lib/.git/config", "vendor/lib/.git/config", ".git"),
        ("sub/.git/hooks/pre-commit", "sub/.git/hooks/pre-commit", ".git"),
        (".wakeful/store.db", ".wakeful/store.db", ".wakeful"),
        ("wakeful.toml", "wakeful.toml", "wakeful.toml"),
        ("WAKEFUL.TOML", "WAKEFUL.TOML", "wakeful.toml"),
        ("config_link.toml", "wakeful.toml", "wakeful.toml"),
        ("wakeful.lock.json", "wakeful.lock.json", "wakeful.lock.json"),
    ],
)
async def test_write_refuses_protected_paths_however_spelt(
    services: Services, project: Path, resolution: str, path: str, shown: str, protected: str
) -> None:
    before = snapshot(project)
    message = await refused(
        services,
        write_file,
        path=path,
        content="[alias]\n x = !touch /tmp/pwned\n",
        create_dirs=True,
    )
    assert message.startswith(f"{shown!r} cannot be written by the agent: {protected!r} is")
    assert "Ask the user to make this change themselves." in message
    assert snapshot(project) == before  # nothing written, no directory created


@pytest.mark.anyio
async def test_edit_refuses_protected_paths_and_reads_still_work(
    services: Services, project: Path, resolution: str
) -> None:
    message = await refused(services, edit_file, path="git_link/config", old="[core]", new="[x]")
    assert message.startswith("'.git/config' cannot be written by the agent")
    assert (project / ".git" / "config").read_text() == "[core]\n"
    message = await refused(services, edit_file, path="wakeful.toml", old="[sandbox]", new="")
    assert "'wakeful.toml' is protected" in message
    # The same names lower down, or as a part of a longer name, are ordinary files.
    await call(services, write_file, path="docs/wakeful.toml", content="x\n", create_dirs=True)
    await call(services, write_file, path=".github/ci.yml", content="x\n", create_dirs=True)
    await call(services, write_file, path="a/.gitignore", content="x\n")
    assert (project / "docs" / "wakeful.toml").read_text() == "x\n"


@pytest.mark.anyio
async def test_writes_through_symlinks_and_dots_stay_confined_with_either_resolver(
    services: Services, root: Path, resolution: str
) -> None:
    (root / "releases" / "v2").mkdir(parents=True)
    (root / "current").symlink_to("releases/v2")
    result = await call(services, write_file, path="current/app.txt", content="v2\n")
    assert result.structured["path"] == "releases/v2/app.txt"
    assert (root / "releases" / "v2" / "app.txt").read_text() == "v2\n"
    for path in ("escape_dir/new.txt", "escape.txt", "current/../../../outside/new.txt"):
        message = await refused(services, write_file, path=path, content="x")
        assert "symlink" in message or "outside the root" in message
    assert sorted(p.name for p in (root.parent / "outside").iterdir()) == ["secret.txt"]
