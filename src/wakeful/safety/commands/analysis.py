"""One check of one command line: the simple commands found, the findings about them, and the
recursion into code strings (`sh -c`, `eval`, heredocs fed to a shell) with a depth limit.

Rules (:mod:`.rules`) look at one simple command at a time and report findings through
:meth:`Analysis.flag`; wrappers (`sudo`, `env`, `xargs`, `find -exec`) hand the command they run
back through :meth:`Analysis.derive`, so it is judged like any other. Shapes that span commands
(a download piped into a shell) are judged at the end from the roles rules give commands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from tree_sitter import Parser

from ..verdict import Decision
from .lexer import remove_continuations
from .parse import Redirect, SimpleCommand, parse_script
from .places import Places
from .words import Word

__all__ = ["Analysis", "Finding", "GroupRedirectRule", "Rule", "quote_command"]

_SHOWN_COMMAND_CHARS: Final = 80
MAX_DEPTH: Final = 4
MAX_COMMANDS: Final = 2000

Rule = Callable[[SimpleCommand, "Analysis"], None]
# Judges a redirect of a whole group or compound statement (`{ …; } > file`): its text, the
# redirect, the analysis to flag in.
GroupRedirectRule = Callable[[str, Redirect, "Analysis"], None]


@dataclass(frozen=True, slots=True)
class Finding:
    """A decision with its reason about one simple command (`command` is its index), or about
    the whole line (`command` None: parse errors, pipelines, fork bombs), which extra allow rules
    never lift."""

    decision: Decision
    reason: str
    command: int | None


def quote_command(text: str) -> str:
    """A command as it appears in a reason: on one line, in backticks, shortened if long."""
    flat = " ".join(text.split())
    if len(flat) > _SHOWN_COMMAND_CHARS:
        flat = flat[: _SHOWN_COMMAND_CHARS - 1] + "…"
    return f"`{flat}`"


class Analysis:
    """The state of one check; `rules` maps a command name to the rules that judge it,
    `always` holds the rules every command passes through and `group_redirect` judges the
    redirects of groups and compound statements. The rules are given, not imported: they are
    written against this class."""

    def __init__(
        self,
        parser: Parser,
        places: Places,
        rules: dict[str, tuple[Rule, ...]],
        always: tuple[Rule, ...],
        allowed_hosts: tuple[str, ...],
        group_redirect: GroupRedirectRule,
    ) -> None:
        self.parser = parser
        self.places = places
        self.rules = rules
        self.always = always
        self.allowed_hosts = allowed_hosts
        self.group_redirect = group_redirect
        self.commands: list[SimpleCommand] = []
        self.findings: list[Finding] = []
        self.roles: dict[int, set[str]] = {}
        self.order: list[int] = []
        self.arithmetic: list[tuple[str, str]] = []
        self.loop_variables: set[str] = set()
        self.written: set[str] = set()
        """Paths commands of this line write, so running one of them later is asked about."""
        self._next_pipeline = 0

    # -- reporting ---------------------------------------------------------------------------

    def flag(self, command: SimpleCommand | None, decision: Decision, what: str) -> None:
        """Record that `command` (None: the whole line) `what`, e.g. "deletes the root /"."""
        subject = f"{quote_command(command.text)} " if command is not None else ""
        reason = f"{subject}{what}; {decision}."
        self.findings.append(
            Finding(decision, reason, command.index if command is not None else None)
        )

    def flag_line(self, statement: str, decision: Decision, what: str) -> None:
        """Record a finding about a statement that is no simple command (a redirected group,
        a function definition); it holds for the whole line."""
        reason = f"{quote_command(statement)} {what}; {decision}."
        self.findings.append(Finding(decision, reason, None))

    def give_role(self, command: SimpleCommand, role: str) -> None:
        """Mark a command as e.g. a "download", "decode" or "stdin-code" runner."""
        self.roles.setdefault(command.index, set()).add(role)

    # -- walking -----------------------------------------------------------------------------

    def run_script(
        self, source: str, *, depth: int, origin: SimpleCommand | None, what: str = ""
    ) -> None:
        """Parse `source` and judge each simple command in it; `origin` is the command that
        runs it as code (`bash -c`, `eval`), `what` how (for the reasons)."""
        if depth > MAX_DEPTH:
            self.flag(
                origin,
                "ask",
                f"nests shell code more than {MAX_DEPTH} levels deep ({what}), which is "
                "not checked further",
            )
            return
        source = remove_continuations(source)
        script = parse_script(
            self.parser,
            source,
            first_index=len(self.commands),
            first_pipeline=self._next_pipeline,
            depth=depth,
        )
        self._next_pipeline += len(script.commands) + 1
        if script.errors:
            where = ", ".join(script.errors[:3])
            what_failed = (
                f"could not be parsed (error at {where}); what cannot be parsed cannot be checked"
            )
            if origin is None:
                self.flag_line(source, "deny", what_failed)
            else:
                self.flag(origin, "deny", f"holds code {what} that {what_failed}")
        for statement, hazard in script.hazards:
            self.flag_line(statement, "ask", hazard)
        self.arithmetic.extend(script.arithmetic)
        self.loop_variables.update(script.loop_variables)
        for function in script.functions:
            if function.forks_itself:
                self.flag_line(
                    function.text,
                    "deny",
                    "defines a function that starts copies of itself in a pipeline or the "
                    "background (a fork bomb)",
                )
        self.commands.extend(script.commands)
        for command in script.commands:
            self.judge(command)
        for statement, redirect in script.group_redirects:
            self.group_redirect(statement, redirect, self)

    def judge(self, command: SimpleCommand) -> None:
        """Run the rules for one simple command."""
        self.order.append(command.index)
        if len(self.commands) > MAX_COMMANDS:
            if not any(f.reason.startswith("The line holds") for f in self.findings):
                self.findings.append(
                    Finding(
                        "ask",
                        f"The line holds more than {MAX_COMMANDS} simple commands, more than "
                        "are checked; ask.",
                        None,
                    )
                )
            return
        for rule in self.always:
            rule(command, self)
        name = command.name
        if name is None:
            return
        for rule in self.rules.get(_rule_key(name), ()):
            rule(command, self)

    def knows(self, name: str) -> bool:
        """Whether rules judge the program `name`."""
        return _rule_key(name) in self.rules

    def derive(self, parent: SimpleCommand, words: Iterable[Word]) -> SimpleCommand | None:
        """The command a wrapper runs (`sudo rm x` → `rm x`), judged like any other; it shares
        the wrapper's pipelines and standard input."""
        tail = tuple(words)
        if not tail:
            return None
        command = SimpleCommand(
            index=len(self.commands),
            text=" ".join(w.text for w in tail),
            words=tail,
            pipes=parent.pipes,
            consumer=parent.consumer,
            stdin_text=parent.stdin_text,
            depth=parent.depth,
        )
        self.commands.append(command)
        self.judge(command)
        return command

    def consumers_of(self, command: SimpleCommand) -> list[SimpleCommand]:
        """The commands whose arguments hold this one's output, innermost first."""
        chain: list[SimpleCommand] = []
        index = command.consumer
        while index is not None and index < len(self.commands) and len(chain) < MAX_COMMANDS:
            consumer = self.commands[index]
            chain.append(consumer)
            index = consumer.consumer
        return chain


def _rule_key(name: str) -> str:
    """The rule table key of a command name: version suffixes fold (`python3.12` → `python`,
    `mkfs.ext4` → `mkfs`)."""
    if name.startswith("python"):
        return "python"
    if name.startswith("mkfs"):
        return "mkfs"
    return name
