"""A directory tree with awkward files, shared by the perception server tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

AWKWARD = (
    (
        "“Curly” quotes and ‘single’ ones\r\n"
        "mixed endings: CRLF above, a lone CR here\rthen LF\n"
        "\ttabs\tinside\t\n"
        "emoji 😀🎉 and é\n"
    ).encode()
    + b"a NUL \x00 byte and bad bytes \xff\xfe here\n"
    + b"x" * 100_000
    + b"\nlast line"
)


def make_tree(base: Path) -> Path:
    root = base / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("def main():\n    return 'TODO: more'\n")
    (root / "src" / "pkg" / "util.py").write_text("# TODO one\n# todo two\nVALUE = 1\n")
    (root / "src" / "app.toml").write_text("timeout = 5\n")
    (root / "awkward.txt").write_bytes(AWKWARD)
    (root / "numbers.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    (root / "empty.txt").write_bytes(b"")
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    (root / ".hidden").write_text("secret-ish\n")
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "objects" / "mod.py").write_text("TODO in git\n")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TODO secret\n")
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    (root / "escape_dir").symlink_to(outside)
    (root / "inside_link.py").symlink_to(root / "src" / "pkg" / "mod.py")
    return root


def text_of(result: Any) -> str:
    (block,) = result.content
    text: str = block.text
    return text
