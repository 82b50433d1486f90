"""Rules for everyday tools with options that run commands or write anywhere (`sort
--compress-program`, `tar --to-command`, `rg --pre`, `man -P`, `sed`'s `e` and `w`, `awk`'s
`system()`), and for the project tools whose subcommands reach outside the project (package
installs and publishing, containers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from .analysis import Analysis, Rule
from .options import has_option, operands, option_values
from .parse import SimpleCommand
from .rules_files import judge_write
from .words import Word

__all__ = ["TOOL_RULES", "ask_options"]


def ask_options(
    command: SimpleCommand, analysis: Analysis, names: Sequence[str], what: str
) -> bool:
    """Ask if any of the options (`-I`, `--to-command`, also as `--opt=value` or `-Ivalue`)
    is given; True when one was."""
    args = command.args
    longs = [n for n in names if n.startswith("--")]
    shorts = [n for n in names if not n.startswith("--")]
    found = bool(option_values(args, names)) or has_option(args, long=longs)
    if not found and shorts:
        found = any(
            (w.value or "").startswith(tuple(shorts)) and not (w.value or "").startswith("--")
            for w in args
        )
    if found:
        analysis.flag(command, "ask", what)
    return found


def _operands_read(command: SimpleCommand, analysis: Analysis, paths: Sequence[Word]) -> None:
    """A tool that reads whole directory trees: a tree holding secrets (the home directory,
    `/`, `/etc`) hands them over."""
    for word in paths:
        location = analysis.places.locate(word)
        if location.path is not None and analysis.places.holds_secrets(location.path):
            direct = analysis.places.holds_secrets_directly(location.path)
            analysis.flag(
                command,
                "deny" if direct else "ask",
                f"reads the whole tree {location.path}, which holds secrets",
            )
            return


def judge_sort(command: SimpleCommand, analysis: Analysis) -> None:
    """`sort --compress-program=PROG` runs PROG; `-o FILE` writes FILE."""
    ask_options(
        command, analysis, ("--compress-program",), "runs a compression program it is given"
    )
    for output in option_values(command.args, ("-o", "--output")):
        judge_write(command, output, analysis)


def judge_split(command: SimpleCommand, analysis: Analysis) -> None:
    """`split --filter=CMD` pipes each piece into a shell command."""
    ask_options(command, analysis, ("--filter",), "pipes each piece into a shell command")


_TAR_RUNS: Final = (
    "--checkpoint-action", "--to-command", "-I", "--use-compress-program", "--info-script",
    "-F", "--new-volume-script", "--rsh-command", "--rmt-command", "--index-file",
)  # fmt: skip


def judge_tar(command: SimpleCommand, analysis: Analysis) -> None:
    """`tar`: options that run programs, archives on another host (`host:file`), absolute
    member names, and the directory it extracts into."""
    args = command.args
    if ask_options(command, analysis, _TAR_RUNS, "runs a program it is given while archiving"):
        return
    first = args[0].value if args else None
    cluster = ""
    if first is not None and not first.startswith("--"):
        cluster = first.lstrip("-")
    if has_option(args, "P", ("--absolute-names",)) or "P" in cluster:
        analysis.flag(command, "ask", "keeps absolute member names, so it may write anywhere")
    archives = option_values(args, ("-f", "--file"))
    if cluster and "f" in cluster:
        archives += list(args[1:2])
    for archive in archives:
        if (
            archive.value is not None
            and ":" in archive.value
            and not has_option(args, long=("--force-local",))
        ):
            analysis.flag(command, "ask", f"uses the archive {archive.text} on another host")
    creates = "c" in cluster or has_option(args, "c", ("--create",))
    for directory in option_values(args, ("-C", "--directory")):
        if not creates:
            judge_write(command, directory, analysis)
    if creates or "r" in cluster or "u" in cluster:
        _operands_read(
            command,
            analysis,
            operands(
                args,
                (
                    "-f",
                    "--file",
                    "-C",
                    "--directory",
                    "-T",
                    "--files-from",
                    "-X",
                    "--exclude-from",
                    "-b",
                    "-H",
                    "--format",
                ),
            ),
        )
    else:
        for archive in archives:
            if archive.value not in (None, "-"):
                continue


def judge_zip(command: SimpleCommand, analysis: Analysis) -> None:
    """`zip -TT CMD` runs CMD to test the archive; recursive zips of trees holding secrets."""
    if ask_options(
        command, analysis, ("-TT", "--unzip-command"), "runs a command to test the archive"
    ):
        return
    found = operands(command.args, ("-b", "-n", "-t", "-tt", "-x", "-i", "-P", "--password"))
    _operands_read(command, analysis, found[1:])


def judge_unzip(command: SimpleCommand, analysis: Analysis) -> None:
    """`unzip -d DIR` writes under DIR."""
    for directory in option_values(command.args, ("-d",)):
        judge_write(command, directory, analysis)


def judge_search(command: SimpleCommand, analysis: Analysis) -> None:
    """`rg --pre CMD` runs CMD on every file; searching a tree holding secrets is asked."""
    if command.name == "rg" and ask_options(
        command, analysis, ("--pre",), "runs a preprocessor command on every file"
    ):
        return
    args = command.args
    recursive = command.name == "rg" or has_option(
        args, "rR", ("--recursive", "--dereference-recursive")
    )
    if not recursive:
        return
    takes = (
        "-e",
        "-f",
        "-m",
        "-A",
        "-B",
        "-C",
        "--include",
        "--exclude",
        "-g",
        "--glob",
        "-t",
        "--type",
        "-T",
        "--max-count",
        "--regexp",
        "--file",
        "--context",
    )
    found = operands(args, takes)
    explicit = bool(option_values(args, ("-e", "--regexp", "-f", "--file")))
    _operands_read(command, analysis, found if explicit else found[1:])


def judge_copy_tree(command: SimpleCommand, analysis: Analysis) -> None:
    """`cp -r`/`scp -r` of a tree holding secrets."""
    if has_option(command.args, "rRa", ("--recursive", "--archive")):
        _operands_read(
            command,
            analysis,
            operands(command.args, ("-t", "--target-directory", "-S", "--suffix"))[:-1],
        )


def judge_diff(command: SimpleCommand, analysis: Analysis) -> None:
    """`diff -r` reads whole trees."""
    args = command.args
    if has_option(args, "r", ("--recursive",)):
        _operands_read(
            command, analysis, [*operands(args), *option_values(args, ("--to-file", "--from-file"))]
        )


def judge_pager(command: SimpleCommand, analysis: Analysis) -> None:
    """`man -P CMD`, `man -H`, `less +CMD`: a pager or browser command, or pager commands."""
    if command.name == "man":
        ask_options(
            command,
            analysis,
            ("-P", "--pager", "-H", "--html", "-E"),
            "runs a pager or browser command it is given",
        )
        return
    if any((w.value or "").startswith("+") for w in command.args):
        analysis.flag(command, "ask", "runs pager commands given with +, which may start programs")


# sed: commands that run programs or write and read files other than its input.
_SED_SIMPLE: Final = frozenset("pPdDnNgGhHxlqQz=F{}!")
_SED_LABEL: Final = frozenset(":btT")
_SED_TEXT: Final = frozenset("aic")


def sed_script_problem(script: str) -> str | None:
    """What in a sed script runs a command or touches other files (`e`, `s///e`, `w`, `r`,
    `R`, `W`), or None; a script this reader does not follow is a problem too."""
    i = 0
    n = len(script)
    while i < n:
        char = script[i]
        if char in " \t\n;":
            i += 1
            continue
        if char.isdigit() or char in "$,~+":
            i += 1
            continue
        if char in "/\\":
            delimiter = script[i + 1] if char == "\\" and i + 1 < n else "/"
            i = _skip_delimited(script, i + (2 if char == "\\" else 1), delimiter)
            if i < 0:
                return "holds an address this reader cannot follow"
            while i < n and script[i] in "IM":
                i += 1
            continue
        if char in _SED_SIMPLE:
            i += 1
            continue
        if char in _SED_LABEL:
            while i < n and script[i] not in ";\n}":
                i += 1
            continue
        if char in _SED_TEXT:
            while i < n and script[i] != "\n":
                i += 2 if script[i] == "\\" else 1
            continue
        if char in "sy":
            if i + 1 >= n:
                return "ends inside an s or y command"
            delimiter = script[i + 1]
            if delimiter in "\n\\":
                return "uses a delimiter this reader cannot follow"
            i = _skip_delimited(script, i + 2, delimiter)
            if i >= 0:
                i = _skip_delimited(script, i, delimiter)
            if i < 0:
                return "holds an s or y command this reader cannot follow"
            if char == "s":
                start = i
                while i < n and script[i] not in ";\n}":
                    i += 1
                flags = script[start:i]
                if "e" in flags or "w" in flags or "W" in flags:
                    return "runs the result as a command or writes it to a file (s///e, s///w)"
            continue
        if char in "ewWrR":
            return f"runs a command or reads or writes another file (the {char} command)"
        return f"holds a command ({char!r}) this reader does not know"
    return None


def _skip_delimited(script: str, i: int, delimiter: str) -> int:
    while i < len(script):
        if script[i] == "\\":
            i += 2
            continue
        if script[i] == delimiter:
            return i + 1
        i += 1
    return -1


def judge_sed(command: SimpleCommand, analysis: Analysis) -> None:
    """`sed SCRIPT`: scripts that run commands or touch other files are asked about, and so is
    a script from a file (`-f`)."""
    args = command.args
    if option_values(args, ("-f", "--file")) or has_option(args, long=("--file",)):
        analysis.flag(command, "ask", "runs a sed script from a file, which is not read here")
        return
    scripts = option_values(args, ("-e", "--expression"))
    if not scripts:
        found = operands(args, ("-l", "--line-length"))
        scripts = found[:1]
    for script in scripts:
        if script.value is None:
            analysis.flag(
                command,
                "ask",
                f"runs the sed script {script.text}, which cannot be checked statically",
            )
            continue
        problem = sed_script_problem(script.value)
        if problem is not None:
            analysis.flag(command, "ask", f"runs a sed script that {problem}")


_AWK_RUNS: Final = re.compile(
    r"\bsystem\s*\(|\|\s*&?\s*getline|\bgetline\b|\bprintf?\b[^;{}]*[|>]|\|\s*\"|\bENVIRON\b|@|\bPROCINFO\b|\bfflush\b"
)


def judge_awk(command: SimpleCommand, analysis: Analysis) -> None:
    """`awk PROGRAM`: `system()`, pipes, `getline` from files or commands, output redirection,
    `ENVIRON`, extensions; a program from a file (`-f`) is asked about."""
    args = command.args
    if option_values(args, ("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec")):
        analysis.flag(command, "ask", "runs an awk program or extension from a file")
        return
    found = operands(args, ("-F", "-v", "--field-separator", "--assign"))
    if not found:
        return
    program = found[0]
    if program.value is None:
        analysis.flag(
            command,
            "ask",
            f"runs the awk program {program.text}, which cannot be checked statically",
        )
    elif _AWK_RUNS.search(program.value):
        analysis.flag(
            command,
            "ask",
            "runs an awk program that may start commands, read other files, write files or read "
            "the environment",
        )


def judge_jq(command: SimpleCommand, analysis: Analysis) -> None:
    """`jq` reading the environment (`env`, `$ENV`) hands over credentials."""
    for word in command.args:
        value = word.value or ""
        if re.search(r"\$ENV\b|(?<![\w.$])env\b", value):
            analysis.flag(command, "ask", "reads the environment, credentials included")
            return


def judge_compiler(command: SimpleCommand, analysis: Analysis) -> None:
    """Compilers write the `-o` file."""
    for output in option_values(command.args, ("-o",)):
        judge_write(command, output, analysis)


def judge_truncate_size(command: SimpleCommand, analysis: Analysis) -> None:
    """`truncate -s`/`fallocate -l` to gigabytes or more fills the disk."""
    for size in option_values(command.args, ("-s", "--size", "-l", "--length")):
        value = (size.value or "?").lstrip("+-<>/%")
        if (
            size.value is None
            or re.search(r"[GTPEZY]", value, re.IGNORECASE)
            or (value.isdigit() and int(value) > 10**9)
        ):
            analysis.flag(command, "ask", f"sizes a file to {size.text}, which may fill the disk")


def judge_chown(command: SimpleCommand, analysis: Analysis) -> None:
    """`chown`/`chgrp` hand files to another user."""
    analysis.flag(command, "ask", "changes who owns files")


def judge_truncate(command: SimpleCommand, analysis: Analysis) -> None:
    """Alias of :func:`judge_truncate_size` for the table."""
    judge_truncate_size(command, analysis)


TOOL_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    "sort": (judge_sort,),
    "split": (judge_split,),
    "tar": (judge_tar,),
    "zip": (judge_zip,),
    "unzip": (judge_unzip,),
    "rg": (judge_search,),
    "grep": (judge_search,),
    "egrep": (judge_search,),
    "fgrep": (judge_search,),
    "man": (judge_pager,),
    "diff": (judge_diff,),
    "less": (judge_pager,),
    "more": (judge_pager,),
    "sed": (judge_sed,),
    **{name: (judge_awk,) for name in ("awk", "gawk", "mawk", "nawk")},
    "jq": (judge_jq,),
    **{
        name: (judge_compiler,)
        for name in ("gcc", "g++", "cc", "c++", "clang", "clang++", "rustc", "ld")
    },
    "truncate": (judge_truncate,),
    "cp": (judge_copy_tree,),
    "scp": (judge_copy_tree,),
    "rsync": (judge_copy_tree,),
    "chown": (judge_chown,),
    "chgrp": (judge_chown,),
    "fallocate": (judge_truncate_size,),
}
