"""Python one-liners judged on their syntax tree: code that only computes and prints is
allowed; code that imports a module able to run programs, change files or reach the network,
reaches interpreter internals, evaluates strings, or opens a file for writing is asked about.

The check is an allow list, so spelling does not matter: `import os as o`, `from os import
system as s`, `__import__('os')`, `getattr(__builtins__, 'ev' + 'al')` and `importlib` are all
outside it. `python -m MODULE` is allowed for the project's own tools (pytest, mypy, …) and for
modules in the workspace.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from typing import Final

from .analysis import Analysis
from .parse import SimpleCommand
from .places import Place, Places
from .rules_files import judge_write
from .words import Word

__all__ = ["judge_python", "judge_python_module"]

_PURE_MODULES: Final = frozenset(
    {
        "math", "cmath", "json", "re", "itertools", "functools", "collections", "datetime",
        "string", "textwrap", "decimal", "fractions", "statistics", "random", "hashlib",
        "base64", "binascii", "uuid", "time", "pprint", "dataclasses", "enum", "typing",
        "operator", "heapq", "bisect", "struct", "unicodedata", "calendar", "zlib", "copy",
        "secrets", "keyword", "sys", "html", "difflib", "colorsys", "numbers", "array", "shlex",
        "fnmatch", "csv", "zoneinfo", "ipaddress", "this", "__future__", "abc", "contextlib",
        "hmac", "graphlib", "locale", "gettext",
    }
)  # fmt: skip
_SYS_ATTRIBUTES: Final = frozenset(
    {
        "version", "version_info", "argv", "path", "platform", "stdin", "stdout", "stderr",
        "exit", "maxsize", "executable", "byteorder", "getsizeof", "getrecursionlimit",
        "float_info", "int_info", "implementation", "prefix", "base_prefix", "hexversion",
        "getdefaultencoding", "getfilesystemencoding", "maxunicode", "flags",
    }
)  # fmt: skip
_FORBIDDEN_NAMES: Final = frozenset(
    {
        "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "globals",
        "locals", "vars", "breakpoint", "input", "help", "__builtins__", "__loader__",
        "__spec__", "memoryview", "classmethod", "staticmethod", "super", "object", "type",
    }
)  # fmt: skip
_WRITE_MODES: Final = frozenset("wax+")
_TOOL_MODULES: Final = frozenset(
    {
        "pytest", "unittest", "mypy", "ruff", "black", "isort", "flake8", "pylint", "json.tool",
        "py_compile", "compileall", "doctest", "timeit", "cProfile", "pstats", "tokenize",
        "ast", "dis", "pyclbr", "tabnanny", "coverage", "pyright", "pyflakes", "tomllib",
        "sysconfig", "site", "platform", "calendar", "base64", "zipfile", "tarfile", "gzip",
    }
)  # fmt: skip
_PIP_READ: Final = frozenset(
    {"list", "show", "freeze", "check", "help", "--version", "-V", "inspect", "debug"}
)


def judge_python(code: str, places: Places) -> list[str]:
    """Why the Python `code` is more than computing and printing (nothing when it is not)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ["runs Python code that does not parse, so what it does cannot be checked"]
    reasons: list[str] = []
    open_calls: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "open"
        ):
            open_calls.add(id(node.func))
            problem = _open_problem(node, places)
            if problem:
                reasons.append(problem)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            if isinstance(node, ast.ImportFrom) and node.level:
                modules = ["." + (node.module or "")]
            for module in modules:
                if module.split(".")[0] not in _PURE_MODULES:
                    reasons.append(
                        f"runs Python code that imports {module}, a module that can run "
                        "programs, change files or reach the network"
                    )
        elif isinstance(node, ast.Name):
            if node.id in _FORBIDDEN_NAMES:
                reasons.append(
                    f"runs Python code that uses {node.id}, which can run or reach any code"
                )
            elif node.id == "open" and id(node) not in open_calls:
                reasons.append("runs Python code that passes open around, hiding what it opens")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                reasons.append(
                    f"runs Python code that reaches the interpreter's internals ({node.attr})"
                )
            elif (
                isinstance(node.value, ast.Name)
                and node.value.id == "sys"
                and node.attr not in _SYS_ATTRIBUTES
            ):
                reasons.append(f"runs Python code that uses sys.{node.attr}")
    # ast.walk goes breadth first, so a call is seen before the name it calls.
    return list(dict.fromkeys(reasons))


def _open_problem(call: ast.Call, places: Places) -> str | None:
    if (
        not call.args
        or not isinstance(call.args[0], ast.Constant)
        or not isinstance(call.args[0].value, str)
    ):
        return "runs Python code that opens a file it names only at run time"
    mode_node: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode_node = keyword.value
        elif keyword.arg is None:
            return "runs Python code that opens a file with options known only at run time"
    mode = "r"
    if mode_node is not None:
        if not isinstance(mode_node, ast.Constant) or not isinstance(mode_node.value, str):
            return "runs Python code that opens a file in a mode known only at run time"
        mode = mode_node.value
    path = call.args[0].value
    location = places.locate(Word(path, path))
    if _WRITE_MODES.intersection(mode):
        return f"runs Python code that writes the file {path}"
    if location.place is Place.SECRET or location.path is None:
        return f"runs Python code that reads {path}, which may hold secrets"
    return None


def judge_python_module(
    command: SimpleCommand, module: Word, args: Sequence[Word], analysis: Analysis
) -> None:
    """`python -m MODULE …`: the project's tools and workspace modules are allowed; `pip` is
    judged by its subcommand; `venv` by where it writes; any other module is asked about."""
    name = module.value
    rest = list(args)
    if module in rest:
        rest = rest[rest.index(module) + 1 :]
    if name is None:
        analysis.flag(
            command,
            "ask",
            f"runs the Python module {module.text}, which cannot be checked statically",
        )
        return
    if name in _TOOL_MODULES:
        return
    if name == "pip":
        judge_pip_words(command, rest, analysis)
        return
    if name == "venv":
        for word in rest:
            if not (word.value or "-").startswith("-"):
                judge_write(command, word, analysis)
        return
    cwd = analysis.places.cwd
    if cwd is not None and _is_workspace_module(cwd, name, analysis):
        return
    analysis.flag(
        command,
        "ask",
        f"runs the Python module {name}, which this policy does not know (it may serve, install "
        "or run anything)",
    )


def _is_workspace_module(cwd: str, name: str, analysis: Analysis) -> bool:
    relative = name.replace(".", "/")
    for base in (cwd, os.path.join(cwd, "src")):
        for candidate in (relative + ".py", os.path.join(relative, "__main__.py")):
            path = os.path.join(base, candidate)
            if (
                os.path.isfile(path)
                and analysis.places.classify(os.path.realpath(path)) is Place.WORKSPACE
            ):
                return path not in analysis.written
    return False


def judge_pip_words(command: SimpleCommand, words: Sequence[Word], analysis: Analysis) -> None:
    """`pip SUBCOMMAND`: reading subcommands are allowed; installing, uninstalling and
    downloading change the environment or reach the network, so they are asked about."""
    sub = next(
        (
            w
            for w in words
            if not (w.value or "-").startswith("-") or w.value in ("--version", "-V")
        ),
        None,
    )
    if sub is None:
        return
    if sub.value in _PIP_READ:
        return
    analysis.flag(
        command,
        "ask",
        f"runs pip {sub.text}, which installs, removes or downloads packages outside the project",
    )
