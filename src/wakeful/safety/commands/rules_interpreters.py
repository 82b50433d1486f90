"""Rules for interpreters: `python -c`, `perl -e`, `ruby -e`, `node -e`, `php -r`, also with
the code flag hidden behind other options (`python3 -W ignore -c`, `python3 -Ic`). Python code is
judged on its syntax tree (:mod:`.python_code`); code in the other languages is asked about and
searched (:mod:`.interpreters`) so that a deny inside it still holds. A program read from standard
input is asked about; a script file is trusted only inside the workspace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .analysis import Analysis
from .catalog import judge_script, judge_stdin_code
from .hosts import judge_hosts
from .interpreters import inspect_code, language_of
from .parse import SimpleCommand
from .places import Place
from .python_code import judge_python, judge_python_module
from .words import HOME_MARK, Word

__all__ = ["judge_interpreter"]


_PYTHON_VALUE_FLAGS: Final = frozenset("WX")
_CODE_FLAGS: Final = {
    "Python": "c",
    "Perl": "eE",
    "Ruby": "e",
    "Node": "ep",
    "PHP": "rBRFE",
}
_INTERACTIVE_FLAGS: Final = {"Python": "i", "PHP": "a", "Node": "i", "Ruby": "", "Perl": "d"}


def judge_interpreter(command: SimpleCommand, analysis: Analysis) -> None:
    """`python -c`, `perl -e`, `ruby -e`, `node -e`, `php -r`, also behind other options
    (`python3 -W ignore -c`, `python3 -Ic`): Python code is judged on its syntax tree; code in
    the other languages is asked about. A program on standard input is asked about; a script
    file is trusted only inside the workspace."""
    name = command.name or ""
    language = language_of(name)
    if language is None:
        return
    args = command.args
    code: Word | None = None
    module: Word | None = None
    i = 0
    while i < len(args):
        word = args[i]
        value = word.value
        if value is None:
            analysis.give_role(command, "code")
            analysis.flag(
                command,
                "ask",
                f"runs {language} with {word.text}, which cannot be checked statically",
            )
            return
        if not value.startswith("-") or value == "-":
            break
        if value == "--":
            i += 1
            break
        if value.startswith("--"):
            if value in ("--version", "--help"):
                return
            if value in ("--eval", "--print") or value.startswith(("--eval=", "--print=")):
                code = _attached(value, args, i)
                break
            if language == "Python" and value == "--check-hash-based-pycs":
                i += 2
                continue
            if language == "Node" and value.split("=", 1)[0] in (
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
            ):
                analysis.flag(command, "ask", f"loads a module before the program ({value})")
                return
            i += 1
            continue
        letters = value[1:]
        taken = False
        for position, letter in enumerate(letters):
            rest = letters[position + 1 :]
            if letter in _CODE_FLAGS[language]:
                code = (
                    Word(rest, rest)
                    if rest
                    else (args[i + 1] if i + 1 < len(args) else Word("", ""))
                )
                taken = True
                break
            if language == "Python" and letter == "m":
                module = Word(rest, rest) if rest else (args[i + 1] if i + 1 < len(args) else None)
                taken = True
                break
            if language == "Python" and letter in _PYTHON_VALUE_FLAGS:
                if not rest:
                    i += 1  # the value is the next word
                break
            if letter in _INTERACTIVE_FLAGS[language] or (language == "Python" and letter == "V"):
                if letter == "V":
                    return
                analysis.flag(command, "ask", f"starts an interactive {language} session")
                return
            if language != "Python" and letter in "IMmrl":
                analysis.flag(command, "ask", f"loads modules or paths given by {value}")
                return
        if taken:
            break
        i += 1
    if module is not None:
        judge_python_module(command, module, args, analysis)
        return
    if code is None:
        if i < len(args) and args[i].value != "-":
            judge_script(command, args[i], analysis, language)
            return
        judge_stdin_code(command, analysis, language)
        if command.stdin_text is not None:
            _judge_code(command, language, command.stdin_text, analysis)
        return
    analysis.give_role(command, "code")
    if code.value is None:
        analysis.flag(
            command, "ask", f"runs {language} code {code.text} that cannot be checked statically"
        )
        return
    if language != "Python":
        analysis.flag(
            command,
            "ask",
            f"runs {language} code given on the command line, which this policy does not read",
        )
    _judge_code(command, language, code.value, analysis)


def _attached(value: str, args: Sequence[Word], i: int) -> Word:
    if "=" in value:
        rest = value.split("=", 1)[1]
        return Word(rest, rest)
    return args[i + 1] if i + 1 < len(args) else Word("", "")


def _judge_code(command: SimpleCommand, language: str, code: str, analysis: Analysis) -> None:
    if language == "Python":
        for what in judge_python(code, analysis.places):
            analysis.flag(command, "ask", what)
    report = inspect_code(language, code)
    for decision, what in report.findings:
        analysis.flag(command, decision, what)
    for shell in report.shell_strings:
        analysis.run_script(
            shell, depth=command.depth + 1, origin=command, what=f"in the {language} code"
        )
    if report.deletes:
        protected = [
            p
            for p in report.paths
            if analysis.places.locate(Word(p, p.replace("~", HOME_MARK, 1))).place
            not in (Place.WORKSPACE, Place.SCRATCH, None)
        ]
        if protected:
            analysis.flag(
                command,
                "deny",
                f"runs {language} code that deletes files and names {', '.join(protected)}",
            )
        else:
            analysis.flag(command, "ask", f"runs {language} code that deletes files")
    if report.hosts:
        judge_hosts(command, report.hosts, analysis, f"runs {language} code that reaches")
