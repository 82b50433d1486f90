"""Rules about the files a command deletes, overwrites, wipes, reads or changes the mode of.

Deleting or overwriting the root, the home directory, system paths or devices is denied;
recursive deletes elsewhere outside the workspace are denied and inside it asked; single-file
writes outside the workspace (and its scratch directories) are asked. Reading stores of secrets
(`~/.ssh` keys, `~/.aws/credentials`, `/etc/shadow`, `.env` files outside the workspace) is
denied. A path only the running shell knows is asked about, never passed.
"""

from __future__ import annotations

from typing import Final

from ..verdict import Decision
from .analysis import Analysis, Rule
from .options import has_option, operands, option_values
from .parse import Redirect, SimpleCommand
from .places import Location, Place
from .words import HOME_MARK, Word

__all__ = ["FILE_RULES", "judge_group_redirect", "judge_redirects", "judge_secret_reads"]

_NEVER_TOUCH: Final = frozenset(
    {Place.ROOT, Place.HOME, Place.DEVICE, Place.SYSTEM, Place.SECRET, Place.HARMLESS_DEVICE}
)
_SAFE_TO_WRITE: Final = frozenset(
    {Place.WORKSPACE, Place.WORKSPACE_ROOT, Place.SCRATCH, Place.HARMLESS_DEVICE}
)
_DISK_TOOLS: Final = (
    "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted",
    "wipefs", "blkdiscard", "badblocks",
)  # fmt: skip


def _describe(location: Location) -> str:
    place = location.place
    if place is Place.ROOT:
        return "the filesystem root /"
    if place is Place.HOME:
        return f"the home directory {location.path}"
    if place is None:
        return "an unknown path"
    return f"{location.path}, {place.value}"


def _unknown(what: str, word: Word) -> str:
    return (
        f"{what} {word.text}, a path that depends on the running shell and cannot be checked "
        "statically"
    )


def judge_delete(command: SimpleCommand, analysis: Analysis) -> None:
    """`rm`, `rmdir`, `unlink`: deny on protected places and recursive deletes outside the
    workspace; ask for recursive deletes inside it; allow single files inside it."""
    args = command.args
    recursive = command.name == "rm" and has_option(args, "rR", ("--recursive",))
    if has_option(args, long=("--no-preserve-root",)):
        analysis.flag(command, "deny", "turns off rm's protection of the root (--no-preserve-root)")
    verb = "deletes the tree at" if recursive else "deletes"
    for word in operands(args):
        location = analysis.places.locate(word)
        if not location.known:
            analysis.flag(command, "ask", _unknown(verb, word))
            continue
        place = location.place
        workspace = analysis.places.workspace
        if place in _NEVER_TOUCH:
            described = _describe(location)
            if word.glob:
                described = f"{word.text}, which matches everything under {described}"
            analysis.flag(command, "deny", f"{verb} {described}")
        elif place is Place.OUTSIDE:
            decision: Decision = "deny" if recursive else "ask"
            analysis.flag(
                command, decision, f"{verb} {location.path}, outside the workspace ({workspace})"
            )
        elif place is Place.WORKSPACE_ROOT or (word.glob and location.path == workspace):
            if recursive or (word.glob and not (word.value or "").startswith(("*.", "./*."))):
                analysis.flag(command, "ask", f"{verb} the whole workspace ({workspace})")
        elif (
            recursive
            and location.path is not None
            and not _is_build_output(location.path, workspace)
        ):
            analysis.flag(
                command,
                "ask",
                f"{verb} {location.path}, inside the workspace but not a build output or cache "
                "that a build recreates",
            )


# Directories a build, a test run or an install recreates: deleting them loses nothing.
_BUILD_OUTPUTS: Final = frozenset(
    {
        "build", "dist", "target", "out", "node_modules", "__pycache__", ".pytest_cache",
        ".mypy_cache", ".ruff_cache", ".tox", ".nox", "htmlcov", "coverage", ".coverage", ".next",
        ".nuxt", ".parcel-cache", ".turbo", ".cache", ".gradle", ".eggs", "_build", "site",
        ".venv", "venv", ".hypothesis", "tmp", ".tmp", "bin", "obj", "cmake-build-debug",
        "cmake-build-release", ".svelte-kit", ".angular", "storybook-static",
    }
)  # fmt: skip


def _is_build_output(path: str, workspace: str) -> bool:
    relative = path[len(workspace.rstrip("/")) + 1 :]
    parts = relative.split("/")
    return any(p in _BUILD_OUTPUTS or p.endswith(".egg-info") for p in parts)


def judge_shred(command: SimpleCommand, analysis: Analysis) -> None:
    """`shred` destroys contents beyond recovery: ask inside the workspace, deny elsewhere."""
    for word in operands(command.args, ("-n", "-s", "--iterations", "--size", "--random-source")):
        location = analysis.places.locate(word)
        if not location.known:
            analysis.flag(command, "ask", _unknown("overwrites beyond recovery", word))
        elif location.place in (Place.WORKSPACE, Place.SCRATCH):
            analysis.flag(command, "ask", f"overwrites {location.path} beyond recovery")
        else:
            analysis.flag(command, "deny", f"overwrites {_describe(location)} beyond recovery")


def judge_dd(command: SimpleCommand, analysis: Analysis) -> None:
    """`dd of=…`: deny on devices and protected places, ask otherwise (it overwrites blindly)."""
    for word in command.args:
        value = word.value
        if value is None:
            if word.text.startswith("of="):
                analysis.flag(command, "ask", _unknown("writes to", word))
            continue
        if not value.startswith("of="):
            continue
        target = Word(word.text[3:], value[3:], word.glob)
        location = analysis.places.locate(target)
        if not location.known:
            analysis.flag(command, "ask", _unknown("writes to", target))
        elif location.place in _NEVER_TOUCH - {Place.HARMLESS_DEVICE}:
            analysis.flag(command, "deny", f"writes raw blocks to {_describe(location)}")
        elif location.place is not Place.HARMLESS_DEVICE:
            analysis.flag(command, "ask", f"overwrites {location.path} block by block")


def judge_disk_tool(command: SimpleCommand, analysis: Analysis) -> None:
    """Formatting and partitioning tools: deny, unless every target is a file in the workspace
    (a disk image), which is asked."""
    targets = [analysis.places.locate(w) for w in operands(command.args)]
    images = targets and all(t.place in (Place.WORKSPACE, Place.SCRATCH) for t in targets)
    if images:
        analysis.flag(command, "ask", "formats or partitions a disk image")
    else:
        analysis.flag(command, "deny", "formats, partitions or wipes disks")


def judge_mode_change(command: SimpleCommand, analysis: Analysis) -> None:
    """`chmod`, `chown`, `chgrp`: deny on system paths (recursive or not), ask outside the
    workspace; a setuid bit is asked anywhere."""
    args = command.args
    found = operands(args, ("--reference",))
    if not has_option(args, long=("--reference",)) and found:
        spec, found = found[0], found[1:]
        if command.name == "chmod" and spec.value is not None and _sets_setuid(spec.value):
            analysis.flag(command, "ask", f"sets the setuid or setgid bit ({spec.value})")
    recursive = has_option(args, "R", ("--recursive",))
    verb = (
        "changes ownership or mode recursively of" if recursive else "changes ownership or mode of"
    )
    for word in found:
        location = analysis.places.locate(word)
        if not location.known:
            if recursive:
                analysis.flag(command, "ask", _unknown(verb, word))
            continue
        if location.place in _NEVER_TOUCH - {Place.HARMLESS_DEVICE}:
            analysis.flag(command, "deny", f"{verb} {_describe(location)}")
        elif location.place is Place.OUTSIDE:
            analysis.flag(command, "ask", f"{verb} {location.path}, outside the workspace")


def _sets_setuid(mode: str) -> bool:
    if mode.isdigit():
        return len(mode) == 4 and mode[0] in "24567"
    return "s" in mode and "+" in mode


def judge_write_targets(command: SimpleCommand, analysis: Analysis) -> None:
    """Commands that write files they are given: `cp`/`mv`/`ln`/`install` (the destination, and
    for `mv` the sources it removes), `tee`, `touch`, `mkdir`, `truncate`, `sed -i`."""
    name = command.name
    args = command.args
    targets: list[Word]
    if name in ("cp", "mv", "ln", "install"):
        directory = option_values(args, ("-t", "--target-directory"))
        found = operands(
            args,
            (
                "-t",
                "--target-directory",
                "-S",
                "--suffix",
                "-m",
                "--mode",
                "-o",
                "-g",
                "--owner",
                "--group",
            ),
        )
        targets = directory or found[-1:]
        if name == "mv":
            targets += found[:-1] if not directory else found
    elif name == "sed":
        if not has_option(args, "i", ("--in-place",), ("-e", "-f", "--expression", "--file")):
            return
        found = operands(args, ("-e", "-f", "--expression", "--file", "-l", "--line-length"))
        script_given = bool(option_values(args, ("-e", "-f", "--expression", "--file")))
        targets = found if script_given else found[1:]
    elif name == "truncate":
        targets = operands(args, ("-s", "--size", "-r", "--reference"))
    else:  # tee, touch, mkdir
        targets = operands(args, ("-m", "--mode", "-d", "--date", "-r", "--reference", "-t"))
    creates_only = name in ("touch", "mkdir")
    for word in targets:
        judge_write(command, word, analysis, creates_only=creates_only)


def judge_write(
    command: SimpleCommand, word: Word, analysis: Analysis, *, creates_only: bool = False
) -> None:
    """One file a command writes: deny on devices and protected places, ask outside the
    workspace and its scratch directories, ask when only the running shell knows the path."""
    verdict = _write_verdict(word, analysis, creates_only=creates_only)
    if verdict is not None:
        analysis.flag(command, *verdict)


def _write_verdict(
    word: Word, analysis: Analysis, *, creates_only: bool = False
) -> tuple[Decision, str] | None:
    location = analysis.places.locate(word)
    if not location.known:
        return None if creates_only else ("ask", _unknown("writes to", word))
    if location.path is not None:
        analysis.written.add(location.path)
    place = location.place
    if location.path is not None and location.path.startswith(("/dev/tcp/", "/dev/udp/")):
        return "deny", f"sends output to the network through {location.path}"
    if place in _SAFE_TO_WRITE:
        return None
    if place in _NEVER_TOUCH:
        return "deny", f"writes to {_describe(location)}"
    workspace = analysis.places.workspace
    return "ask", f"writes to {location.path}, outside the workspace ({workspace})"


def _secret_verdict(word: Word, analysis: Analysis) -> tuple[Decision, str] | None:
    places = analysis.places
    location = places.locate(word)
    if location.place is Place.SECRET or places.may_match_secret(word):
        return "deny", f"reads {location.path or word.text}, a store of secrets"
    if location.path is not None and location.path.startswith(("/dev/tcp/", "/dev/udp/")):
        return "ask", f"opens a network connection through {location.path}"
    return None


def judge_redirects(command: SimpleCommand, analysis: Analysis) -> None:
    """Every command's redirections: writes are judged like :func:`judge_write`, reads by
    whether they open a store of secrets."""
    for redirect in command.redirects:
        verdict = (
            _write_verdict(redirect.target, analysis)
            if redirect.writes
            else _secret_verdict(redirect.target, analysis)
        )
        if verdict is not None:
            analysis.flag(command, *verdict)


def judge_group_redirect(statement: str, redirect: Redirect, analysis: Analysis) -> None:
    """A redirection of a group, subshell, loop or pipeline (`{ …; } > /etc/x`): the statement
    is no simple command of its own, so its finding holds for the whole line."""
    verdict = (
        _write_verdict(redirect.target, analysis)
        if redirect.writes
        else _secret_verdict(redirect.target, analysis)
    )
    if verdict is not None:
        analysis.flag_line(statement, *verdict)


# Commands whose operands are files they read: an operand only the running shell knows may be
# a store of secrets (`cat $(echo ~/.ssh/id_rsa)`, `xargs cat`).
_FILE_READERS: Final = frozenset(
    {
        "cat", "head", "tail", "less", "more", "nl", "tac", "od", "xxd", "hexdump", "strings",
        "base64", "base32", "basenc", "cp", "scp", "rsync", "tar", "zip", "gzip", "bzip2", "xz",
        "zstd", "grep", "egrep", "fgrep", "rg", "sort", "uniq", "wc", "cut", "paste", "diff",
        "cmp", "comm", "jq", "awk", "sed", "source", ".", "md5sum", "sha1sum", "sha256sum",
        "sha512sum", "file", "curl", "nc", "openssl", "gpg", "dd", "tee", "mv", "ln", "install",
    }
)  # fmt: skip


def judge_secret_reads(command: SimpleCommand, analysis: Analysis) -> None:
    """Any argument naming a store of secrets, also as `--opt=PATH` or `key=PATH`, resolved
    against the command's directory (so `cd ~/.ssh && cat id_rsa` is seen); for programs that
    read their operands, an operand only the running shell knows is asked about."""
    reader = command.name in _FILE_READERS
    for word in command.args:
        value = word.value
        if value is None:
            if reader and not word.text.startswith("-"):
                analysis.flag(command, "ask", _unknown("reads", word))
                reader = False  # once is enough
            continue
        if "=" in value and not value.startswith(("/", "~", HOME_MARK)):
            value = value.split("=", 1)[1]
        value = value.removeprefix("@")  # curl -d @FILE, -F field=@FILE
        if value.startswith("if="):
            value = value[3:]
        if not value or value.startswith("-"):
            continue
        verdict = _secret_verdict(
            Word(
                word.text,
                value,
                word.glob,
                word.glob_at - (len(word.value or "") - len(value)) if word.glob_at >= 0 else -1,
            ),
            analysis,
        )
        if verdict is not None:
            analysis.flag(command, *verdict)


def judge_cd(command: SimpleCommand, analysis: Analysis) -> None:
    """`cd`/`pushd`/`popd` move the directory later relative paths are resolved against; a
    move only the running shell knows makes later relative paths unknown."""
    places = analysis.places
    found = operands(command.args)
    if command.name == "popd" or (found and found[0].value in (None, "-")):
        places.cwd = None
        return
    target = found[0].value if found else HOME_MARK
    places.cwd = places.path_of(target or HOME_MARK)


FILE_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    "rm": (judge_delete,),
    "rmdir": (judge_delete,),
    "unlink": (judge_delete,),
    "shred": (judge_shred,),
    "dd": (judge_dd,),
    **{name: (judge_disk_tool,) for name in _DISK_TOOLS},
    "chmod": (judge_mode_change,),
    "chown": (judge_mode_change,),
    "chgrp": (judge_mode_change,),
    **{
        name: (judge_write_targets,)
        for name in ("cp", "mv", "ln", "install", "tee", "touch", "mkdir", "truncate", "sed")
    },
    "cd": (judge_cd,),
    "pushd": (judge_cd,),
    "popd": (judge_cd,),
}
