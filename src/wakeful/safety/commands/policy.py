"""The shell command policy: a command line in, allow / ask / deny with reasons out.

The line is parsed with tree-sitter-bash, never string-matched; every simple command in it
(and in the code strings it hands to `sh -c`, `eval`, `xargs`, `find -exec`, `sudo`, heredocs,
interpreter one-liners) is judged by built-in rules, then by the extra rules of
:class:`PolicySettings`. The strictest decision wins and every reason at that level is listed.
"""

from __future__ import annotations

import logging
import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..verdict import Decision, Verdict, strictest
from .analysis import Analysis, Finding, Rule, quote_command
from .arithmetic import judge_arithmetic
from .extra_rules import best_match, compile_rules
from .lexer import refusal
from .parse import SimpleCommand, new_parser
from .places import Places
from .rules_builtins import BUILTIN_RULES
from .rules_exec import ALWAYS_RULES, EXEC_RULES
from .rules_files import FILE_RULES, judge_group_redirect, judge_redirects, judge_secret_reads
from .rules_git import GIT_RULES
from .rules_network import NETWORK_RULES
from .rules_project import PROJECT_RULES
from .rules_system import SYSTEM_RULES
from .rules_tools import TOOL_RULES
from .shapes import judge_shapes

log = logging.getLogger(__name__)

__all__ = ["CommandDecision", "CommandPolicy", "PolicySettings"]


def _merged(*tables: dict[str, tuple[Rule, ...]]) -> dict[str, tuple[Rule, ...]]:
    """One rule table from several; a command in more than one runs all their rules."""
    merged: dict[str, tuple[Rule, ...]] = {}
    for table in tables:
        for name, rules in table.items():
            merged[name] = (*merged.get(name, ()), *rules)
    return merged


_RULES: Final[dict[str, tuple[Rule, ...]]] = _merged(
    FILE_RULES,
    EXEC_RULES,
    SYSTEM_RULES,
    NETWORK_RULES,
    GIT_RULES,
    BUILTIN_RULES,
    TOOL_RULES,
    PROJECT_RULES,
)
_ALWAYS: Final[tuple[Rule, ...]] = (*ALWAYS_RULES, judge_redirects, judge_secret_reads)
_LOCAL_HOSTS: Final = ("localhost", "127.0.0.1", "::1")


class PolicySettings(BaseModel):
    """The `[safety.commands]` table: where the workspace is, which hosts may be reached, and
    extra rules.

    `allow`, `ask` and `deny` are command prefixes matched word by word against every simple
    command found (`"git push"`, `"docker"`, `"make deploy*"`). Deny rules beat allow rules; an
    allow rule lifts the built-in *ask* findings of the commands it matches (e.g. `"curl"` lets
    curl reach any host), but **extra allow rules never override the built-in deny rules**
    (`rm -rf /` stays denied whatever is allowed), nor whole-line findings such as a download
    piped into a shell or a line that could not be parsed.
    """

    model_config = ConfigDict(extra="forbid")

    workspace: Path | None = Field(
        default=None,
        description="The directory commands may change freely; None means the current "
        "directory of the process at check time.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=lambda: list(_LOCAL_HOSTS),
        description="Network hosts commands may reach without asking: exact names, "
        "'*.example.com' for subdomains, or '*' for every host.",
    )
    allow: list[str] = Field(default_factory=list, description="Command prefixes to allow.")
    ask: list[str] = Field(default_factory=list, description="Command prefixes to ask about.")
    deny: list[str] = Field(default_factory=list, description="Command prefixes to deny.")
    scratch_dirs: list[Path] = Field(
        default_factory=lambda: [Path(tempfile.gettempdir())],
        description="Directories outside the workspace that commands may write to (the "
        "temporary directory by default).",
    )

    @field_validator("allow", "ask", "deny")
    @classmethod
    def _rules_are_shell_words(cls, rules: list[str]) -> list[str]:
        for rule in rules:
            try:
                words = shlex.split(rule)
            except ValueError as exc:
                raise ValueError(
                    f"The rule {rule!r} is not valid shell words ({exc}); write a command "
                    "prefix such as 'git push' or \"rm -rf 'my dir'\"."
                ) from exc
            if not words:
                raise ValueError(
                    "A rule is empty; write a command prefix such as 'git push' or remove it."
                )
        return rules


@dataclass(frozen=True)
class CommandDecision:
    """The policy's answer about one command line: the decision, the reasons at that level
    (each a sentence naming the simple command and the rule), and the simple commands found."""

    decision: Decision
    reasons: tuple[str, ...]
    commands: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """`{"decision": …, "reasons": […]}`, the shape `wakeful check-command --json` prints."""
        return {"decision": self.decision, "reasons": list(self.reasons)}

    def to_json_with_commands(self) -> dict[str, Any]:
        """:meth:`to_json` plus the simple commands found."""
        return {**self.to_json(), "commands": list(self.commands)}


class CommandPolicy:
    """Judges shell command lines against built-in rules and :class:`PolicySettings`.

    `check` is pure and fast (one parse, no subprocess; paths are resolved with realpath).
    One policy is not safe to use from several threads at once (it holds one parser)."""

    def __init__(self, settings: PolicySettings | None = None) -> None:
        self.settings = settings if settings is not None else PolicySettings()
        self._parser = new_parser()
        self._extra = compile_rules(self.settings.allow, self.settings.ask, self.settings.deny)

    def check(self, command: str, *, cwd: Path | None = None) -> CommandDecision:
        """Judge `command` as bash would run it in `cwd` (default: the workspace).

        Never raises: a line bash could not run as written (a NUL byte, invalid Unicode) or one
        the checker fails on is denied with the reason, because what was not checked is not
        allowed."""
        refused = refusal(command)
        if refused is not None:
            return CommandDecision("deny", (f"{quote_command(command)} {refused}; deny.",), ())
        try:
            return self._check(command, cwd)
        except RecursionError:
            return CommandDecision(
                "deny",
                (
                    f"{quote_command(command)} nests deeper than the checker can follow; split "
                    "it into simpler commands; deny.",
                ),
                (),
            )
        except Exception as exc:  # fail closed: a checker bug must never allow a command
            log.exception("the command policy failed on %r; denying it", command)
            return CommandDecision(
                "deny",
                (
                    f"{quote_command(command)} could not be checked (the checker failed with "
                    f"{type(exc).__name__}); what cannot be checked is not run; deny.",
                ),
                (),
            )

    def _check(self, command: str, cwd: Path | None) -> CommandDecision:
        workspace = self.settings.workspace if self.settings.workspace is not None else Path.cwd()
        places = Places(
            str(workspace),
            str(cwd if cwd is not None else workspace),
            os.path.expanduser("~"),
            tuple(str(d) for d in self.settings.scratch_dirs),
        )
        analysis = Analysis(
            self._parser,
            places,
            _RULES,
            _ALWAYS,
            tuple(self.settings.allowed_hosts),
            judge_group_redirect,
        )
        analysis.run_script(command, depth=0, origin=None)
        judge_shapes(analysis)
        judge_arithmetic(analysis)
        return self._decide(analysis)

    def _decide(self, analysis: Analysis) -> CommandDecision:
        by_command: dict[int, list[Finding]] = {}
        verdicts: list[Verdict] = []
        for finding in analysis.findings:
            if finding.command is None:
                verdicts.append(Verdict(finding.decision, (finding.reason,)))
            else:
                by_command.setdefault(finding.command, []).append(finding)
        ordered = [analysis.commands[i] for i in analysis.order]
        for command in ordered:
            findings = by_command.get(command.index, [])
            verdicts.append(self._judge_with_rules(command, findings))
        final = strictest(verdicts)
        return CommandDecision(final.decision, final.reasons, tuple(c.text for c in ordered))

    def _judge_with_rules(self, command: SimpleCommand, findings: list[Finding]) -> Verdict:
        built_in = strictest([Verdict(f.decision, (f.reason,)) for f in findings])
        match = best_match(self._extra, command)
        if match is None:
            return built_in
        rule = match.rule
        subject = quote_command(command.text)
        if not match.certain:
            reason = (
                f"{subject} may match the {rule.decision} rule {rule.text!r} (a word of it "
                "depends on the running shell); ask."
            )
            return strictest([built_in, Verdict("ask", (reason,))])
        if rule.decision == "allow":
            if built_in.decision == "deny":
                return built_in
            return Verdict("allow", (f"{subject} is allowed by the rule {rule.text!r}.",))
        reason = f"{subject} matches the {rule.decision} rule {rule.text!r}; {rule.decision}."
        return strictest([built_in, Verdict(rule.decision, (reason,))])
