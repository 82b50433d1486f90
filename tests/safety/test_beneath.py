"""Opening beneath a root by descriptor, with openat2 and with the component walk that replaces it.

Every test runs twice: once as the kernel allows (openat2), once with the walk forced, so the
fallback keeps the same confinement where openat2 is missing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

from wakeful.errors import ToolError
from wakeful.safety import beneath
from wakeful.safety.beneath import LOCATE, Root


@pytest.fixture
def tree(tmp_path: Path, resolution: str) -> Path:
    base = tmp_path / "root"
    (base / "src" / "pkg").mkdir(parents=True)
    (base / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (base / "releases" / "v2").mkdir(parents=True)
    (base / "releases" / "v2" / "app.txt").write_text("v2\n")
    (base / "100%25 done.txt").write_text("a literal percent sign\n")
    (base / "README.md").write_text("# hi\n")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key.txt").write_text("s3cret\n")
    (base / "to_secret").symlink_to(outside)
    (base / "to_secret_relative").symlink_to("../secret")
    (base / "key_link.txt").symlink_to(outside / "key.txt")
    (base / "inner_link").symlink_to(base / "src")  # absolute, but under the root
    (base / "current").symlink_to("releases/v2")  # relative, under the root
    (base / "up_and_back").symlink_to("src/../releases/../src/pkg")
    (base / "climbs_out").symlink_to("src/../../secret")
    (base / "loop_a").symlink_to("loop_b")
    (base / "loop_b").symlink_to("loop_a")
    (base / "dangling").symlink_to("nowhere")
    return base


@pytest.fixture
def root(tree: Path) -> Iterator[Root]:
    with Root(tree) as opened:
        yield opened


def read(root: Root, user_path: str) -> tuple[str, bytes]:
    with root.open(user_path) as found:
        return found.shown, found.read_bytes()


def test_the_fallback_can_be_forced(resolution: str) -> None:
    assert beneath.openat2_available() is (resolution == "openat2")


def test_paths_inside_the_root_open_and_name_where_they_led(root: Root) -> None:
    assert read(root, "src/pkg/mod.py") == ("src/pkg/mod.py", b"x = 1\n")
    assert read(root, "src/../README.md") == ("README.md", b"# hi\n")
    assert read(root, str(root.path / "README.md")) == ("README.md", b"# hi\n")
    assert read(root, "./src//pkg/./mod.py")[0] == "src/pkg/mod.py"
    assert read(root, "100%25 done.txt")[0] == "100%25 done.txt"
    for spelling in ("", ".", "src/..", str(root.path)):
        with root.open(spelling) as found:
            assert found.relative == PurePosixPath(".") and found.shown == "."
            assert stat.S_ISDIR(os.fstat(found.fd).st_mode)


@pytest.mark.parametrize(
    ("link", "expected"),
    [
        ("current/app.txt", "releases/v2/app.txt"),
        ("inner_link/pkg/mod.py", "src/pkg/mod.py"),
        ("up_and_back/mod.py", "src/pkg/mod.py"),
        ("current/../v2/app.txt", "releases/v2/app.txt"),
    ],
)
def test_symlinks_that_stay_under_the_root_are_followed(
    root: Root, link: str, expected: str
) -> None:
    shown, _ = read(root, link)
    assert shown == expected


@pytest.mark.parametrize(
    "attack",
    ["..", "../secret/key.txt", "src/../../secret/key.txt", "/etc/passwd", "/", "./../root/x"],
)
def test_dot_dot_and_absolute_escapes_are_refused(root: Root, attack: str) -> None:
    with pytest.raises(ToolError) as caught:
        root.open(attack)
    message = str(caught.value)
    assert "outside the root" in message and str(root.path) in message
    assert "relative to the root" in message


@pytest.mark.parametrize(
    "attack",
    [
        "to_secret/key.txt",
        "to_secret_relative/key.txt",
        "key_link.txt",
        "to_secret",
        "climbs_out/key.txt",
        "src/../to_secret/key.txt",
    ],
)
def test_symlinks_that_leave_the_root_are_refused(root: Root, attack: str) -> None:
    with pytest.raises(ToolError, match="symlink") as caught:
        root.open(attack)
    assert str(root.path) in str(caught.value)
    assert root.resolved(attack) is None


def test_a_loop_a_missing_file_and_a_file_in_the_way_are_named(root: Root) -> None:
    with pytest.raises(ToolError, match="symlink loop"):
        root.open("loop_a")
    with pytest.raises(ToolError, match=r"no file or directory 'nope\.txt'"):
        root.open("nope.txt")
    with pytest.raises(ToolError, match=r"no file or directory 'dangling'"):
        root.open("dangling")
    with pytest.raises(ToolError, match="Not a directory"):
        root.open("README.md/x")


@pytest.mark.parametrize(
    ("attack", "expected"),
    [
        ("%2e%2e%2fsecret", "percent-encoded"),
        ("..%2fsecret", "percent-encoded"),
        ("%252e%252e%252fsecret", "percent-encoded"),
        ("src%00.txt", "percent-encoded"),
        ("README.md\x00.png", "NUL byte"),
    ],
)
def test_encoded_tricks_and_nul_bytes_are_refused(root: Root, attack: str, expected: str) -> None:
    with pytest.raises(ToolError, match=expected):
        root.open(attack)


def test_a_root_that_is_itself_a_symlink_works(tmp_path: Path, tree: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(tree)
    with Root(alias) as root:
        assert root.path == tree.resolve()
        assert read(root, "README.md") == ("README.md", b"# hi\n")
        with pytest.raises(ToolError, match="symlink"):
            root.open("to_secret/key.txt")


def test_a_fifo_opens_without_blocking(root: Root, tree: Path) -> None:
    os.mkfifo(tree / "pipe")
    with root.open("pipe") as found:
        assert stat.S_ISFIFO(os.fstat(found.fd).st_mode)


# --- placing a write -----------------------------------------------------------------------------


def test_a_placement_names_the_directory_held_and_the_file(root: Root, tree: Path) -> None:
    with root.place("src/pkg/new.py") as place:
        assert (place.name, place.shown, place.missing) == ("new.py", "src/pkg/new.py", ())
        assert os.path.samestat(os.fstat(place.directory), os.stat(tree / "src" / "pkg"))
    with root.place("current/app.txt") as place:
        assert place.shown == "releases/v2/app.txt"


def test_a_final_symlink_is_followed_to_its_target_under_the_root(root: Root, tree: Path) -> None:
    (tree / "notes.txt").symlink_to("src/pkg/mod.py")
    with root.place("notes.txt") as place:
        assert place.shown == "src/pkg/mod.py"
    (tree / "absolute.txt").symlink_to(tree / "README.md")
    with root.place("absolute.txt") as place:
        assert place.shown == "README.md"
    with pytest.raises(ToolError, match="symlink"):
        root.place("key_link.txt")


def test_missing_directories_are_made_one_at_a_time(root: Root, tree: Path) -> None:
    with root.place("a/b/c.txt") as place:
        assert place.missing == ("a", "b") and place.shown == "a/b/c.txt"
        assert not (tree / "a").exists()
        place.make_directories()
        assert not place.missing
        assert os.path.samestat(os.fstat(place.directory), os.stat(tree / "a" / "b"))


def test_a_directory_swapped_for_a_symlink_is_not_entered_when_made(
    root: Root, tree: Path, tmp_path: Path
) -> None:
    with root.place("made/x.txt") as place:
        (tree / "made").symlink_to(tmp_path / "secret")  # planted before mkdirat runs
        with pytest.raises(ToolError, match="replaced by something that is not a directory"):
            place.make_directories()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".", "is a directory"),
        ("src/..", "is a directory"),
        ("README.md/x.txt", "'README.md' is a file"),
        ("nope/../x.txt", "climbs with '..'"),
        ("../x.txt", "outside the root"),
        ("to_secret/new.txt", "symlink"),
        ("dangling/new.txt", "symlink"),
    ],
)
def test_placements_that_cannot_be_written_are_refused(
    root: Root, tree: Path, path: str, expected: str
) -> None:
    if path == "dangling/new.txt":
        # A dangling link as a directory on the way: making it would follow nothing.
        with root.place(path) as place:
            assert place.missing == ("dangling",)
            with pytest.raises(ToolError, match="not a directory"):
                place.make_directories()
        return
    with pytest.raises(ToolError, match=expected):
        root.place(path)


def test_open_found_reports_an_escape_as_exdev(root: Root) -> None:
    with pytest.raises(OSError) as caught:
        root.open_found("to_secret/key.txt", LOCATE)
    assert caught.value.errno == 18  # EXDEV
    assert root.resolved("current") == PurePosixPath("releases/v2")
