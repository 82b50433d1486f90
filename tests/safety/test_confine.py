"""Path confinement against every shape of escape we know, on a real directory tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wakeful.errors import ToolError
from wakeful.safety import confine, display_path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "src" / "pkg").mkdir(parents=True)
    (base / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (base / "100%25 done.txt").write_text("a literal percent sign\n")
    (base / "README.md").write_text("# hi\n")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key.txt").write_text("s3cret\n")
    (base / "to_secret").symlink_to(outside)
    (base / "key_link.txt").symlink_to(outside / "key.txt")
    (base / "inner_link").symlink_to(base / "src")
    (base / "loop_a").symlink_to(base / "loop_b")
    (base / "loop_b").symlink_to(base / "loop_a")
    return base


def test_paths_inside_the_root_resolve(root: Path) -> None:
    real = root.resolve()
    assert confine(root, "src/pkg/mod.py") == real / "src" / "pkg" / "mod.py"
    assert confine(root, "") == real
    assert confine(root, ".") == real
    assert confine(root, "src/../README.md") == real / "README.md"
    assert confine(root, str(real / "README.md")) == real / "README.md"
    assert confine(root, "inner_link/pkg") == real / "src" / "pkg"
    assert display_path(confine(root, "src/pkg"), real) == "src/pkg"
    assert display_path(confine(root, "."), real) == "."


def test_a_literal_percent_sign_in_a_name_is_fine(root: Path) -> None:
    assert confine(root, "100%25 done.txt").name == "100%25 done.txt"


@pytest.mark.parametrize(
    "attack",
    [
        "..",
        "../secret/key.txt",
        "src/../../secret/key.txt",
        "src/pkg/../../../secret",
        "/etc/passwd",
        "/",
        "./../root/../secret",
    ],
)
def test_dot_dot_and_absolute_escapes_are_refused(root: Path, attack: str) -> None:
    with pytest.raises(ToolError) as caught:
        confine(root, attack)
    message = str(caught.value)
    assert str(root.resolve()) in message
    assert "outside the root" in message
    assert "relative to the root" in message


@pytest.mark.parametrize("attack", ["to_secret/key.txt", "key_link.txt", "to_secret"])
def test_symlinks_that_leave_the_root_are_refused(root: Path, attack: str) -> None:
    with pytest.raises(ToolError, match="symlink") as caught:
        confine(root, attack)
    assert str(root.resolve()) in str(caught.value)


def test_a_symlink_loop_is_refused(root: Path) -> None:
    with pytest.raises(ToolError, match=r"loop|cannot be opened"):
        confine(root, "loop_a")


@pytest.mark.parametrize(
    "attack",
    [
        "%2e%2e%2fsecret",
        "%2E%2E/secret",
        "..%2fsecret",
        "src%2f..%2f..%2fsecret",
        "%252e%252e%252fsecret",
        "src%00.txt",
        "..%5csecret",
    ],
)
def test_percent_encoded_traversal_is_refused(root: Path, attack: str) -> None:
    with pytest.raises(ToolError, match="percent-encoded") as caught:
        confine(root, attack)
    assert str(root.resolve()) in str(caught.value)


def test_nul_bytes_are_refused(root: Path) -> None:
    with pytest.raises(ToolError, match="NUL byte"):
        confine(root, "README.md\x00.png")


def test_a_missing_path_says_so_without_probing_outside(root: Path) -> None:
    with pytest.raises(ToolError, match=r"no file or directory 'nope\.txt'"):
        confine(root, "nope.txt")
    # A missing file outside is reported as an escape, not as missing.
    with pytest.raises(ToolError, match="outside the root"):
        confine(root, "../does-not-exist")


def test_a_root_that_is_itself_a_symlink_works(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert confine(alias, "README.md") == root.resolve() / "README.md"
    with pytest.raises(ToolError):
        confine(alias, "to_secret/key.txt")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_an_unreadable_directory_in_the_way_is_an_error(root: Path) -> None:
    locked = root / "locked"
    locked.mkdir()
    (locked / "f").write_text("x")
    locked.chmod(0)
    try:
        with pytest.raises(ToolError):
            confine(root, "locked/f")
    finally:
        locked.chmod(0o755)
