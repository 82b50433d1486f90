"""Rules for bash builtins that run strings as code or reveal the environment: `let`,
`declare -i`, `printf -v`, `read` and friends with array subscripts, `trap`, `hash -p`, `coproc`,
`complete -C`, `bind -x`, `enable -f`, `fc`, `mapfile -C`, and the commands that print every
variable (`set`, `declare -p`, `export -p`, `env`, `printenv`, `compgen -v`).
"""

from __future__ import annotations

from typing import Final

from .analysis import Analysis, Rule
from .options import has_option, operands, option_values
from .parse import SimpleCommand

__all__ = ["BUILTIN_RULES"]

_SUBSCRIPT_REASON: Final = (
    "names an array element, whose subscript bash evaluates as arithmetic, running the command "
    "substitutions in it"
)
_PRINTS_VARIABLES: Final = "prints every variable of the environment, credentials included"


def _ask_subscripts(command: SimpleCommand, analysis: Analysis, words: list[str | None]) -> None:
    for value in words:
        if value is None:
            analysis.flag(
                command,
                "ask",
                "names a variable only the running shell knows, which may be "
                "an array element whose subscript bash runs as code",
            )
            return
        if "[" in value.split("=", 1)[0]:
            analysis.flag(command, "ask", _SUBSCRIPT_REASON)
            return


def judge_let(command: SimpleCommand, analysis: Analysis) -> None:
    """`let EXPR…`: each word is arithmetic."""
    for word in command.args:
        if word.value is None:
            analysis.flag(
                command,
                "ask",
                f"evaluates {word.text} as arithmetic, which cannot be checked statically",
            )
            return
        analysis.arithmetic.append((command.text, word.value))


def judge_declare(command: SimpleCommand, analysis: Analysis) -> None:
    """`declare`/`typeset`/`local`/`export`/`readonly`: printing every variable, the integer
    attribute (later assignments become arithmetic) and array-element names."""
    args = command.args
    names = [w for w in args if not (w.value or "x").startswith(("-", "+"))]
    if not names:
        if command.name != "local" and not has_option(args, "fF"):
            analysis.flag(command, "ask", _PRINTS_VARIABLES)
        return
    if has_option(args, "i"):
        analysis.flag(
            command,
            "ask",
            "gives a variable the integer attribute, so what is assigned to it is "
            "evaluated as arithmetic, where a subscript runs code",
        )
    _ask_subscripts(command, analysis, [w.value for w in names])


def judge_names(command: SimpleCommand, analysis: Analysis) -> None:
    """`read`, `unset`, `wait -p`, `getopts`, `mapfile`: variable names that may be array
    elements; `mapfile -C CODE` runs CODE."""
    args = command.args
    if command.name in ("mapfile", "readarray") and option_values(args, ("-C",)):
        analysis.flag(command, "ask", "runs a callback string as code for every few lines read")
        return
    takes = ("-d", "-n", "-N", "-p", "-t", "-u", "-C", "-c", "-O", "-s", "-a", "-i", "-e")
    _ask_subscripts(command, analysis, [w.value for w in operands(args, takes)])
    _ask_subscripts(command, analysis, [w.value for w in option_values(args, ("-a", "-p"))])


def judge_printf(command: SimpleCommand, analysis: Analysis) -> None:
    """`printf -v NAME`: NAME may be an array element."""
    _ask_subscripts(command, analysis, [w.value for w in option_values(command.args, ("-v",))])


def judge_test(command: SimpleCommand, analysis: Analysis) -> None:
    """`test -v NAME` / `[ -v NAME ]` evaluates a subscript in NAME."""
    args = command.args
    for i, word in enumerate(args[:-1]):
        if word.value == "-v":
            _ask_subscripts(command, analysis, [args[i + 1].value])


def judge_trap(command: SimpleCommand, analysis: Analysis) -> None:
    """`trap CODE SIGNAL…`: CODE runs later, on a signal, an error or at exit."""
    args = command.args
    if not args or has_option(args, "lp"):
        return
    found = operands(args)
    if len(found) < 2:
        return  # `trap SIGNAL` resets it
    code = found[0]
    analysis.flag(command, "ask", "sets a trap, code bash runs later on a signal or at exit")
    if code.value is not None:
        analysis.run_script(code.value, depth=command.depth + 1, origin=command, what="in a trap")


def judge_ask(what: str) -> Rule:
    def judge(command: SimpleCommand, analysis: Analysis) -> None:
        analysis.flag(command, "ask", what)

    judge.__doc__ = f"Always ask: the command {what}."
    return judge


def judge_hash(command: SimpleCommand, analysis: Analysis) -> None:
    """`hash -p PATH NAME` makes NAME run PATH."""
    if has_option(command.args, "p"):
        analysis.flag(command, "ask", "makes a command name run another program (hash -p)")


def judge_complete(command: SimpleCommand, analysis: Analysis) -> None:
    """`complete -C CMD`/`-F FUNC` run code; `compgen -v`/`-e` list variables."""
    args = command.args
    if option_values(args, ("-C", "-F")):
        analysis.flag(command, "ask", "registers a command or function that completion runs")
    elif command.name == "compgen" and (
        has_option(args, "ve") or any(w.value in ("variable", "export") for w in args)
    ):
        analysis.flag(command, "ask", "lists the variables of the environment")


def judge_bind(command: SimpleCommand, analysis: Analysis) -> None:
    """`bind -x` binds a key to shell code."""
    if has_option(command.args, "x"):
        analysis.flag(command, "ask", "binds a key to shell code")


def judge_enable(command: SimpleCommand, analysis: Analysis) -> None:
    """`enable -f LIB NAME` loads a builtin from a shared library."""
    if has_option(command.args, "f"):
        analysis.flag(command, "ask", "loads a builtin from a shared library")


def judge_set(command: SimpleCommand, analysis: Analysis) -> None:
    """`set` alone prints every variable."""
    if not command.args:
        analysis.flag(command, "ask", _PRINTS_VARIABLES)


BUILTIN_RULES: Final[dict[str, tuple[Rule, ...]]] = {
    "let": (judge_let,),
    **{name: (judge_declare,) for name in ("declare", "typeset", "local", "export", "readonly")},
    **{
        name: (judge_names,)
        for name in ("read", "unset", "wait", "getopts", "mapfile", "readarray")
    },
    "printf": (judge_printf,),
    "test": (judge_test,),
    "[": (judge_test,),
    "trap": (judge_trap,),
    "hash": (judge_hash,),
    "coproc": (judge_ask("starts a coprocess, a command that runs alongside this one"),),
    "complete": (judge_complete,),
    "compgen": (judge_complete,),
    "bind": (judge_bind,),
    "enable": (judge_enable,),
    "fc": (judge_ask("runs commands from the shell history"),),
    "set": (judge_set,),
    "printenv": (judge_ask(_PRINTS_VARIABLES.replace("every", "the")),),
}
