"""Which programs the policy knows: a command is allowed only if the policy can tell what the
program it starts does.

A program has rules (`rm`, `git`, `curl`, …) or is a plain tool whose only effects are the
files named on its command line and its redirections, which the generic rules judge (`ls`,
`grep`, `wc`, …). Any other name is asked about: it may be a runner that starts other programs
(`tmux`, `at`, `strace`, `systemd-run`), a client that changes things outside the project (`psql`,
`kubectl`), or an interpreter the policy cannot read (`lua`, `julia`). A program named by a path
is allowed only from a system directory: `./x` or `build/tool` may be anything, a copy of
`/bin/sh` included.
"""

from __future__ import annotations

import os
from typing import Final

from .analysis import Analysis
from .parse import SimpleCommand
from .places import Place
from .words import Word

__all__ = ["PLAIN", "judge_program", "judge_script", "judge_stdin_code"]

_SYSTEM_BIN_DIRS: Final = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"}
)
PLAIN: Final = frozenset(
    {
        # shell builtins and keywords with no effect beyond the shell itself
        ":", "true", "false", "echo", "exit", "return", "shift", "break", "continue", "jobs",
        "bg", "fg", "disown", "times", "ulimit", "umask", "shopt", "type", "help", "history",
        "caller", "dirs", "unalias", "logout", "suspend", "[[", "]]",
        # reading and reporting
        "ls", "dir", "vdir", "cat", "head", "tail", "wc", "uniq", "cut", "tr", "diff", "diff3",
        "sdiff", "cmp", "comm", "grep", "egrep", "fgrep", "zgrep", "fd", "fdfind", "tree", "file",
        "stat", "du", "df", "basename", "dirname", "realpath", "readlink", "pwd", "date", "cal",
        "which", "whoami", "id", "groups", "uname", "hostname", "uptime", "free", "nproc",
        "getconf", "locale", "tty", "seq", "yes", "sleep", "nl", "tac", "rev", "paste", "join",
        "fold", "fmt", "column", "expand", "unexpand", "od", "hexdump", "strings", "md5sum",
        "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "sum",
        "shuf", "tsort", "numfmt", "iconv", "look", "wait", "ps", "pgrep", "pstree", "lsof",
        "clear", "reset", "tput", "less", "more", "most", "bat", "batcat", "expr", "factor",
        "whereis", "lscpu", "lsblk", "nm", "objdump", "readelf", "size", "ldd", "csplit",
        "envsubst", "gettext", "pathchk", "mktemp", "printf", "test", "[",
        "delta", "colordiff", "git-lfs", "wdiff", "xmllint", "yq", "tldr",
        # compressing (files they write are named by their operands, judged as writes)
        "gzip", "gunzip", "zcat", "bzip2", "bunzip2", "bzcat", "xz", "unxz", "xzcat", "zstd",
        "unzstd", "zstdcat", "lz4", "brotli",
        # building and checking a project in the workspace
        "ruff", "mypy", "black", "isort", "flake8", "pylint", "pyright", "pyflakes", "bandit",
        "pycodestyle", "pydocstyle", "eslint", "prettier", "tsc", "gofmt", "goimports",
        "golangci-lint", "rustfmt", "clippy-driver", "shellcheck", "shfmt", "hadolint",
        "yamllint", "markdownlint", "stylelint", "cmake", "ninja", "meson", "rustc", "javac",
        "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "ar", "as", "strip", "pkg-config",
        "autoreconf", "autoconf", "automake", "libtool", "protoc", "sqlfmt", "ctags", "coverage",
        "tox-quickstart", "pre-commit-hook", "biome", "vitest", "jest", "mocha", "ts-node",
    }
)  # fmt: skip


def judge_program(command: SimpleCommand, analysis: Analysis) -> None:
    """Ask about a program the policy does not know, or one named by a path outside the system
    directories."""
    if not command.words or command.words[0].value is None or command.words[0].glob:
        return  # no command, or a dynamic name (asked by judge_dynamic_name)
    value = command.words[0].value
    name = command.name or ""
    if "/" in value:
        directory = os.path.dirname(value)
        if directory not in _SYSTEM_BIN_DIRS:
            where = analysis.places.locate(command.words[0])
            shown = where.path if where.path is not None else command.words[0].text
            analysis.flag(
                command,
                "ask",
                f"runs the program {shown} by its path; a program outside the system "
                "directories may be anything (a copy of a shell, a build output), which cannot be "
                "checked",
            )
            return
    if analysis.knows(name) or name in PLAIN:
        return
    analysis.flag(
        command,
        "ask",
        f"runs {name}, a program this policy does not know, so what it runs or changes cannot "
        "be checked (add an allow rule for it in [safety.commands] if it is safe)",
    )


def judge_script(command: SimpleCommand, script: Word, analysis: Analysis, runner: str) -> None:
    """A script file a shell or interpreter runs: the project's own code in the workspace is
    trusted like `make` or `pytest` trust it, unless this line wrote it; anything else is asked
    about."""
    location = analysis.places.locate(script)
    analysis.give_role(command, "code")
    if location.path is None or script.glob:
        analysis.flag(
            command,
            "ask",
            f"runs the {runner} script {script.text}, which cannot be checked statically",
        )
    elif location.path in analysis.written:
        analysis.flag(
            command,
            "ask",
            f"runs the {runner} script {location.path}, which this same line writes, so what "
            "it holds cannot be checked",
        )
    elif location.place is not Place.WORKSPACE:
        analysis.flag(
            command,
            "ask",
            f"runs the {runner} script {location.path}, outside the workspace; what it holds "
            "cannot be checked",
        )


def judge_stdin_code(command: SimpleCommand, analysis: Analysis, runner: str) -> None:
    """A shell or interpreter that reads its program from standard input: whatever reaches it
    there (a pipe, a file, a heredoc, the terminal) runs unseen by this check."""
    analysis.give_role(command, "stdin-code")
    analysis.flag(
        command,
        "ask",
        f"runs as {runner} code whatever text reaches its standard input, which cannot be checked",
    )
