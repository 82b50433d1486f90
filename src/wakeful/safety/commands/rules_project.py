"""Rules for the project's own tools: `make`, `pytest`, `npm`/`yarn`/`pnpm`/`bun`, `cargo`,
`go`, `pip`, `uv`/`poetry` and containers. Building, testing and running the project's scripts
are allowed (the project's code is trusted like its tests); installing packages, publishing,
global changes, running downloaded packages and starting containers reach outside the project
and are asked about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .analysis import Analysis, Rule
from .options import has_option, operands, option_values
from .parse import SimpleCommand
from .places import Place
from .python_code import judge_pip_words
from .rules_tools import ask_options
from .words import Word

__all__ = ["PROJECT_RULES"]


def judge_make(command: SimpleCommand, analysis: Analysis) -> None:
    """`make`: targets of the project's Makefile are trusted like its tests; variables set on
    the command line override the Makefile's commands, and other makefiles or `--eval` text
    are asked about."""
    args = command.args
    if ask_options(
        command,
        analysis,
        ("-f", "--file", "--makefile", "--eval", "-E", "-I", "--include-dir"),
        "runs make with a makefile or text given on its command line",
    ):
        return
    directories = option_values(args, ("-C", "--directory"))
    for directory in directories:
        location = analysis.places.locate(directory)
        if location.place not in (Place.WORKSPACE, Place.WORKSPACE_ROOT):
            analysis.flag(
                command, "ask", f"runs the makefile in {directory.text}, outside the workspace"
            )
    for word in args:
        value = word.value
        if value is None or ("=" in value and not value.startswith("-")):
            analysis.flag(
                command,
                "ask",
                f"sets the make variable {word.text}, which can change the commands make runs",
            )
            return


def judge_pytest(command: SimpleCommand, analysis: Analysis) -> None:
    """`pytest`: plugins (`-p`), a root outside the workspace, and test paths outside it."""
    args = command.args
    if ask_options(
        command,
        analysis,
        ("-p", "--rootdir", "--confcutdir", "-c", "--config-file", "--pyargs"),
        "loads plugins or configuration given on its command line",
    ):
        return
    for word in operands(
        args,
        (
            "-k",
            "-m",
            "-n",
            "--maxfail",
            "--tb",
            "-W",
            "-o",
            "--durations",
            "--junitxml",
            "--cov",
            "--basetemp",
            "-r",
        ),
    ):
        location = analysis.places.locate(
            Word(word.text, (word.value or "").split("::")[0], word.glob, word.glob_at)
        )
        if location.place not in (Place.WORKSPACE, Place.WORKSPACE_ROOT):
            analysis.flag(command, "ask", f"runs tests from {word.text}, outside the workspace")
            return


def _subcommand(args: Sequence[Word], takes: Sequence[str] = ()) -> tuple[str | None, list[Word]]:
    found = operands(args, takes)
    if not found:
        return "", []
    return found[0].value, found[1:]


_NPM_ALLOWED: Final = frozenset(
    {"test", "t", "tst", "run", "run-script", "start", "ls", "list", "ll", "la", "outdated",
     "help", "version", "pack", "why", "explain", "config", "get", "prefix", "root", "bin",
     "doctor", "build", "lint", "format", "typecheck", "check", "dev", "fund", "stop", "restart"}
)  # fmt: skip


def judge_node_packages(command: SimpleCommand, analysis: Analysis) -> None:
    """`npm`, `yarn`, `pnpm`, `bun`: running the project's scripts and reading are allowed;
    installs (which run downloaded install scripts), global changes, publishing, and running
    downloaded packages (`npx`, `dlx`, `exec`) are asked about."""
    args = command.args
    if has_option(args, "g", ("--global", "--location")):
        analysis.flag(command, "ask", "changes globally installed packages")
        return
    sub, _ = _subcommand(args, ("--prefix", "-C", "--cwd", "--filter", "-w", "--workspace"))
    if sub == "" and command.name in ("yarn", "pnpm", "bun"):
        sub = "install"
    if sub == "" or sub in ("--version", "-v", "--help"):
        return
    if sub is None:
        analysis.flag(
            command, "ask", f"runs a {command.name} subcommand that cannot be checked statically"
        )
    elif sub not in _NPM_ALLOWED:
        analysis.flag(
            command,
            "ask",
            f"runs {command.name} {sub}, which installs, publishes or runs packages from outside "
            "the project",
        )


_CARGO_ALLOWED: Final = frozenset(
    {"build", "b", "check", "c", "test", "t", "run", "r", "fmt", "clippy", "doc", "d", "bench",
     "tree", "metadata", "clean", "new", "init", "help", "version", "--version", "-V",
     "locate-project", "pkgid", "verify-project", "read-manifest", "nextest"}
)  # fmt: skip
_GO_ALLOWED: Final = frozenset(
    {"build", "test", "vet", "fmt", "run", "list", "version", "env", "doc", "mod", "help",
     "generate", "tool", "work", "clean", "bug"}
)  # fmt: skip


def judge_cargo(command: SimpleCommand, analysis: Analysis) -> None:
    """`cargo`: building and testing the project is allowed; installing and publishing not."""
    sub, _ = _subcommand(
        command.args,
        (
            "--manifest-path",
            "-p",
            "--package",
            "-j",
            "--jobs",
            "--target",
            "--features",
            "-F",
            "--config",
            "-Z",
        ),
    )
    if option_values(command.args, ("--config",)) or has_option(command.args, long=("--config",)):
        analysis.flag(command, "ask", "changes cargo's configuration on its command line")
    if sub and sub not in _CARGO_ALLOWED:
        analysis.flag(
            command, "ask", f"runs cargo {sub}, which installs or publishes outside the project"
        )
    elif sub is None:
        analysis.flag(command, "ask", "runs a cargo subcommand that cannot be checked statically")


def judge_go(command: SimpleCommand, analysis: Analysis) -> None:
    """`go`: building and testing the project is allowed; `install` and `get` are not."""
    sub, _ = _subcommand(command.args, ("-C",))
    if sub and sub not in _GO_ALLOWED:
        analysis.flag(command, "ask", f"runs go {sub}, which installs programs outside the project")
    elif sub is None:
        analysis.flag(command, "ask", "runs a go subcommand that cannot be checked statically")


def judge_pip(command: SimpleCommand, analysis: Analysis) -> None:
    """`pip`/`pip3`: see :func:`judge_pip_words`."""
    judge_pip_words(command, command.args, analysis)


def judge_project_runner(command: SimpleCommand, analysis: Analysis) -> None:
    """`uv run CMD`, `poetry run CMD`, `pipenv run CMD`, `pdm run CMD`: the command is judged;
    other subcommands (installs, adding packages, publishing) are asked about."""
    args = command.args
    sub, rest = _subcommand(args, ("--directory", "--project", "-C", "--python", "-p"))
    name = command.name
    if sub == "run":
        index = next(i for i, w in enumerate(args) if w.value == "run")
        payload = list(args[index + 1 :])
        while payload and (payload[0].value or "").startswith("-"):
            option = payload.pop(0).value or ""
            if option in (
                "--with",
                "--with-requirements",
                "--from",
                "--index",
                "--extra-index-url",
                "--script",
                "--python",
                "-p",
                "--env-file",
                "--directory",
                "--project",
                "--package",
                "--extra",
                "--group",
            ):
                analysis.flag(
                    command,
                    "ask",
                    f"runs with {option}, which adds packages or code from elsewhere",
                )
                return
            if option == "--":
                break
        analysis.derive(command, payload)
        return
    if name == "uv" and sub == "pip" and rest:
        judge_pip_words(command, rest, analysis)
        return
    if sub in ("--version", "version", "help", "show", "list", "tree", "check", "lock", "env"):
        return
    analysis.flag(
        command,
        "ask",
        f"runs {name} {sub or ''}, which may install or publish packages".replace("  ", " "),
    )


_DOCKER_READ: Final = frozenset(
    {"ps", "images", "version", "info", "logs", "inspect", "stats", "top", "--version", "help"}
)


def judge_container(command: SimpleCommand, analysis: Analysis) -> None:
    """`docker`/`podman`: listing and inspecting are allowed; running, building, pushing and
    removing reach outside the project (a mount of `/` is the whole machine)."""
    sub, _rest = _subcommand(
        command.args, ("-H", "--host", "--context", "-c", "--config", "-l", "--log-level")
    )
    if sub in _DOCKER_READ and not option_values(command.args, ("-H", "--host", "--context")):
        return
    analysis.flag(
        command,
        "ask",
        f"runs {command.name} {sub or ''}, which starts, changes or publishes containers "
        "outside the project",
    )


PROJECT_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    "make": (judge_make,),
    "gmake": (judge_make,),
    "pytest": (judge_pytest,),
    "py.test": (judge_pytest,),
    **{name: (judge_node_packages,) for name in ("npm", "yarn", "pnpm", "bun")},
    "cargo": (judge_cargo,),
    "go": (judge_go,),
    "pip": (judge_pip,),
    "pip3": (judge_pip,),
    **{name: (judge_project_runner,) for name in ("uv", "poetry", "pipenv", "pdm", "hatch")},
    **{name: (judge_container,) for name in ("docker", "podman", "nerdctl")},
}
