"""Channel filters: what the agent cares about, checked before it is woken.

A :class:`ChannelFilter` is declared with a channel (in ``[[channels.<kind>]]`` as ``filter =
{…}``, or as `connect_channel`'s `filter`). Every condition is optional and all that are given
must hold. An event a filter rejects is still stored, with status "filtered" and the reason, so it
costs no model call but stays countable (`wakeful events tail --filtered`).

A filter reads an event through documented keys that channels put in ``event.content`` when it
is a dict: ``from`` (an address, or "Name <address>"), ``subject``, ``text``, ``repository``
("owner/name", or GitHub's object with ``full_name``), ``event_type`` (e.g. "pull_request"),
``labels`` (strings, or GitHub's objects with ``name``), and ``event.kind``. A string content is
read as ``text``.

Regular expressions come from configuration and from the agent, and run on outside text, so they
are checked when the filter is built: one that does not compile, or whose shape can backtrack
catastrophically, is refused with the reason. Two shapes are refused (see
:func:`backtracking_risk`): a quantifier inside a repeated group where either repeat is
unbounded (``(a+)+``, ``(\\w+\\s?)*``), and two unbounded repeats in a row that can match the same
character (``.*.*``, ``\\w+\\d+``), which is polynomial backtracking on a long non-matching text.
Matching then reads at most :data:`MATCH_CHARS` characters of each field, bounding what any
accepted pattern can cost.
"""

from __future__ import annotations

import re

# The parse tree of `re` patterns, for the shape check (typeshed has no stubs for them; the public
# names sre_parse and sre_constants are deprecated aliases of these).
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parser  # type: ignore[import-not-found]
from collections.abc import Iterable, Sequence
from email.utils import parseaddr
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from ..events import Event

__all__ = ["MATCH_CHARS", "ChannelFilter", "backtracking_risk"]

MATCH_CHARS: Final = 8192
"""How much of one field (subject, text) a filter's expressions read: the rest is not matched."""

_REPOSITORY: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_DOMAIN: Final = re.compile(r"@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
# A sender that is not an address: a GitHub login, a Slack or Telegram user id, an XMPP-less id.
_SENDER_ID: Final = re.compile(r"[a-z0-9][a-z0-9_.\-]{0,127}")

Names = Annotated[list[str], Field(max_length=1000)]


class ChannelFilter(BaseModel):
    """Which of a channel's events wake the agent; see the module docs. Empty: all of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    senders_allow: Names = Field(
        default_factory=list,
        description="Only these senders wake the agent: addresses ('bob@example.com'), whole "
        "domains ('@example.com') or ids (a GitHub login, a chat user id), case-insensitive.",
    )
    senders_deny: Names = Field(
        default_factory=list,
        description="These senders never wake the agent (checked before senders_allow); the "
        "same forms as senders_allow.",
    )
    subject_regex: str | None = Field(
        default=None,
        description="A Python regular expression the subject must contain (re.search), e.g. "
        "'(?i)invoice|receipt'.",
    )
    body_regex: str | None = Field(
        default=None, description="A Python regular expression the text must contain."
    )
    keywords: Names = Field(
        default_factory=list,
        description="At least one of these words must appear in the subject or text (whole "
        "words, case-insensitive), e.g. ['urgent', 'outage'].",
    )
    repositories: Names = Field(
        default_factory=list,
        description="Only events about these GitHub repositories, as 'owner/name'.",
    )
    event_types: Names = Field(
        default_factory=list,
        description="Only these event kinds ('github.pull_request') or GitHub event names "
        "('pull_request', 'issues').",
    )
    labels: Names = Field(
        default_factory=list,
        description="At least one of these labels must be on the event (case-insensitive).",
    )

    _subject: re.Pattern[str] | None = PrivateAttr(default=None)
    _body: re.Pattern[str] | None = PrivateAttr(default=None)
    _keywords: re.Pattern[str] | None = PrivateAttr(default=None)

    @field_validator("senders_allow", "senders_deny")
    @classmethod
    def _senders(cls, values: list[str]) -> list[str]:
        kept = []
        for value in values:
            sender = value.strip().lower()
            if sender.startswith("@"):
                if not _DOMAIN.fullmatch(sender):
                    raise ValueError(
                        f"{value!r} is not a domain: write a whole domain after '@', e.g. "
                        "'@example.com'."
                    )
            elif "@" not in sender:
                if not _SENDER_ID.fullmatch(sender):
                    raise ValueError(
                        f"{value!r} is not an email address, a domain nor a sender id: write "
                        "'bob@example.com', '@example.com' or an id such as a GitHub login "
                        "('octocat') or a chat user id ('U024BE7LH')."
                    )
            elif sender.count("@") != 1 or any(c.isspace() for c in sender) or "." not in sender:
                raise ValueError(
                    f"{value!r} is not an email address nor a domain: write "
                    "'bob@example.com' or '@example.com'."
                )
            kept.append(sender)
        return kept

    @field_validator("subject_regex", "body_regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            _compiled(value)
        return value

    @field_validator("keywords")
    @classmethod
    def _words(cls, values: list[str]) -> list[str]:
        words = [v.strip() for v in values]
        if any(not w for w in words):
            raise ValueError("a keyword is empty: give words such as ['urgent', 'outage'].")
        return words

    @field_validator("repositories")
    @classmethod
    def _repositories(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _REPOSITORY.fullmatch(value):
                raise ValueError(
                    f"{value!r} is not a repository: write 'owner/name', e.g. 'python/cpython'."
                )
        return [v.lower() for v in values]

    @field_validator("event_types", "labels")
    @classmethod
    def _names(cls, values: list[str]) -> list[str]:
        names = [v.strip().lower() for v in values]
        if any(not n for n in names):
            raise ValueError("a name is empty: remove it, or give the name.")
        return names

    def model_post_init(self, context: Any, /) -> None:
        if self.subject_regex is not None:
            self._subject = _compiled(self.subject_regex)
        if self.body_regex is not None:
            self._body = _compiled(self.body_regex)
        if self.keywords:
            alternatives = "|".join(re.escape(w) for w in self.keywords)
            self._keywords = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)

    @property
    def empty(self) -> bool:
        """Whether the filter lets every event through."""
        return self == ChannelFilter()

    def rejects(self, event: Event) -> str | None:
        """Why `event` should not wake the agent, or None when it should."""
        fields = event.content if isinstance(event.content, dict) else {"text": event.content}
        if (self.senders_allow or self.senders_deny) and (
            reason := self._sender_rejects(fields.get("from"))
        ):
            return reason
        subject = _text(fields.get("subject"))[:MATCH_CHARS]
        text = _text(fields.get("text"))[:MATCH_CHARS]
        if self._subject is not None and not self._subject.search(subject):
            return f"the subject does not match subject_regex {self.subject_regex!r}"
        if self._body is not None and not self._body.search(text):
            return f"the text does not match body_regex {self.body_regex!r}"
        if self._keywords is not None and not (
            self._keywords.search(subject) or self._keywords.search(text)
        ):
            return f"none of the keywords {', '.join(self.keywords)} is in the subject or text"
        if self.repositories:
            repository = _repository(fields.get("repository"))
            if repository not in self.repositories:
                shown = repository or "(none)"
                return f"repository {shown} is not in repositories"
        if self.event_types:
            kinds = {event.kind.lower(), _text(fields.get("event_type")).lower()} - {""}
            if not kinds & set(self.event_types):
                return f"event type {' / '.join(sorted(kinds))} is not in event_types"
        if self.labels:
            labels = _labels(fields.get("labels"))
            if not labels & set(self.labels):
                shown = ", ".join(sorted(labels)) or "none"
                return f"none of its labels ({shown}) is in labels"
        return None

    def _sender_rejects(self, value: object) -> str | None:
        address = parseaddr(_text(value))[1].lower()
        if not address:
            return (
                "the event has no sender, and the filter names senders"
                if (self.senders_allow)
                else None
            )
        if _sender_in(address, self.senders_deny):
            return f"sender {address} is in senders_deny"
        if self.senders_allow and not _sender_in(address, self.senders_allow):
            return f"sender {address} is not in senders_allow"
        return None


def _sender_in(address: str, senders: Iterable[str]) -> bool:
    domain = "@" + address.rpartition("@")[2]
    return any(s in (address, domain) for s in senders)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _repository(value: object) -> str:
    if isinstance(value, dict):
        value = value.get("full_name")
    return _text(value).lower()


def _labels(value: object) -> set[str]:
    if not isinstance(value, list):
        return set()
    names = (item.get("name") if isinstance(item, dict) else item for item in value)
    return {name.lower() for name in names if isinstance(name, str)}


# --- the shape check -----------------------------------------------------------------------------


def _compiled(pattern: str) -> re.Pattern[str]:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}.") from exc
    if risk := backtracking_risk(pattern):
        raise ValueError(
            f"{pattern!r} can backtrack catastrophically on a long text ({risk}). Rewrite it "
            "without a repeat inside a repeat, e.g. '(a+)+' as 'a+', '.*.*' as '.*'."
        )
    return compiled


_UNBOUNDED: Final = sre_constants.MAXREPEAT
_REPEATS: Final = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT)
# The characters a single-character item is tried on to tell whether two repeats overlap.
_PROBE: Final = [chr(c) for c in range(128)] + ["é", "中", "\u00a0", "\u2028"]


def backtracking_risk(pattern: str) -> str | None:
    """Why `pattern` (valid for `re`) can backtrack catastrophically, or None.

    Refused: a variable-length repeat inside a repeated group where either is unbounded
    (exponential: ``(a+)+``), and two unbounded repeats in a row whose items can match the same
    character (polynomial: ``.*.*``). Possessive repeats and atomic groups cannot backtrack
    and are allowed. Overlapping alternatives under a repeat (``(a|a)*``) are not detected:
    :data:`MATCH_CHARS` bounds what they cost.
    """
    parsed = sre_parser.parse(pattern)
    return _risk_in(list(parsed), outer=None, flags=parsed.state.flags)


def _risk_in(items: Sequence[Any], *, outer: bool | None, flags: int) -> str | None:
    """The risk in a sequence of parsed items; `outer` is None outside any repeat, else
    whether the nearest enclosing repeat is unbounded."""
    previous_unbounded: Any = None
    for op, arg in items:
        if op in _REPEATS:
            low, high, body = arg
            unbounded = high == _UNBOUNDED
            if outer is not None and low != high and (outer or unbounded):
                return "a quantifier inside a repeated group"
            if risk := _risk_in(list(body), outer=unbounded if high > 1 else outer, flags=flags):
                return risk
            if unbounded:
                if previous_unbounded is not None and _overlap(previous_unbounded, body, flags):
                    return "two unbounded repeats in a row that can match the same characters"
                previous_unbounded = body
            elif low > 0:
                previous_unbounded = None
        elif op is sre_constants.SUBPATTERN:
            if risk := _risk_in(list(arg[-1]), outer=outer, flags=flags):
                return risk
            previous_unbounded = None
        elif op is sre_constants.BRANCH:
            for branch in arg[1]:
                if risk := _risk_in(list(branch), outer=outer, flags=flags):
                    return risk
            previous_unbounded = None
        elif op is sre_constants.AT:
            continue  # zero-width: the repeats on either side are still in a row
        else:
            previous_unbounded = None
    return None


def _overlap(first: Any, second: Any, flags: int) -> bool:
    """Whether two repeated bodies can start with the same character; a body that is not one
    character class counts as overlapping (the safe answer)."""
    a, b = _first_chars(first, flags), _first_chars(second, flags)
    return a is None or b is None or bool(a & b)


def _first_chars(body: Any, flags: int) -> set[str] | None:
    items = list(body)
    if len(items) != 1:
        return None
    op, arg = items[0]
    if op is sre_constants.SUBPATTERN:
        return _first_chars(arg[-1], flags)
    matcher = _single_char_pattern(op, arg)
    if matcher is None:
        return None
    compiled = re.compile(matcher, flags & (re.IGNORECASE | re.ASCII | re.DOTALL))
    return {c.lower() if flags & re.IGNORECASE else c for c in _PROBE if compiled.fullmatch(c)}


def _single_char_pattern(op: Any, arg: Any) -> str | None:
    if op is sre_constants.LITERAL:
        return re.escape(chr(arg))
    if op is sre_constants.NOT_LITERAL:
        return f"[^{re.escape(chr(arg))}]"
    if op is sre_constants.ANY:
        return "."
    if op is sre_constants.IN:
        return _class_pattern(arg)
    return None


_CATEGORIES: Final = {
    sre_constants.CATEGORY_DIGIT: r"\d",
    sre_constants.CATEGORY_NOT_DIGIT: r"\D",
    sre_constants.CATEGORY_SPACE: r"\s",
    sre_constants.CATEGORY_NOT_SPACE: r"\S",
    sre_constants.CATEGORY_WORD: r"\w",
    sre_constants.CATEGORY_NOT_WORD: r"\W",
}


def _class_pattern(items: Sequence[Any]) -> str | None:
    parts = []
    for op, arg in items:
        if op is sre_constants.NEGATE:
            parts.append("^")
        elif op is sre_constants.LITERAL:
            parts.append(re.escape(chr(arg)))
        elif op is sre_constants.RANGE:
            parts.append(f"{re.escape(chr(arg[0]))}-{re.escape(chr(arg[1]))}")
        elif op is sre_constants.CATEGORY and arg in _CATEGORIES:
            parts.append(_CATEGORIES[arg])
        else:
            return None
    return f"[{''.join(parts)}]"
