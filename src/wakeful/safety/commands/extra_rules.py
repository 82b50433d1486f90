"""Extra allow/ask/deny rules from configuration: command prefixes matched word by word
against each simple command (`"git push"` matches `git push origin main` and
`/usr/bin/git push`; a word may use shell wildcards, `"make deploy*"`).

Deny rules beat everything. Between ask and allow rules the longer (more specific) prefix wins,
and ask wins a tie. A word of the command that only the running shell knows may be anything, so
it matches a deny or ask rule's word (the command is then asked about) but never an allow rule's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..verdict import Decision
from .parse import SimpleCommand

__all__ = ["ExtraRule", "RuleMatch", "best_match", "compile_rules"]


@dataclass(frozen=True, slots=True)
class ExtraRule:
    """One configured prefix, split into words like a shell would split it."""

    decision: Decision
    text: str
    words: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """The rule that decides a command; `certain` is False when a dynamic word matched."""

    rule: ExtraRule
    certain: bool


def compile_rules(allow: list[str], ask: list[str], deny: list[str]) -> tuple[ExtraRule, ...]:
    """The configured prefixes as rules (shell quoting allowed: `"rm -rf 'my dir'"`)."""
    rules: list[ExtraRule] = []
    for decision, texts in (("deny", deny), ("ask", ask), ("allow", allow)):
        for text in texts:
            words = tuple(shlex.split(text))
            if words:
                rules.append(ExtraRule(decision, text, words))  # type: ignore[arg-type]
    return tuple(rules)


def _matches(rule: ExtraRule, command: SimpleCommand) -> bool | None:
    """True if the command starts with the rule's words, None if only dynamic words stand in the
    way, False otherwise."""
    words = command.words
    if len(words) < len(rule.words):
        return False
    certain = True
    for position, (pattern, word) in enumerate(zip(rule.words, words, strict=False)):
        value = word.value
        if value is None:
            certain = False
            continue
        if position == 0 and "/" not in pattern:
            value = value.rsplit("/", 1)[-1]
        if not fnmatchcase(value, pattern):
            return False
    return True if certain else None


def best_match(rules: tuple[ExtraRule, ...], command: SimpleCommand) -> RuleMatch | None:
    """The rule that decides `command`, following the precedence in the module docstring."""
    best: RuleMatch | None = None
    for rule in rules:
        matched = _matches(rule, command)
        if matched is False or (matched is None and rule.decision == "allow"):
            continue
        candidate = RuleMatch(rule, matched is True)
        if best is None or _outranks(candidate, best):
            best = candidate
    return best


def _outranks(new: RuleMatch, old: RuleMatch) -> bool:
    if new.rule.decision == "deny" or old.rule.decision == "deny":
        return old.rule.decision != "deny"
    if len(new.rule.words) != len(old.rule.words):
        return len(new.rule.words) > len(old.rule.words)
    return new.rule.decision == "ask" and old.rule.decision == "allow"
