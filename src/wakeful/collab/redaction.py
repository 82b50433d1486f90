"""Redaction: private values never reach a child agent, whatever the strategy chose.

A :class:`Redactor` knows two kinds of private data. Values that look private wherever they
appear (card numbers that pass the Luhn check, IBANs that pass mod-97, passwords and security
codes after their label, API keys, US social security numbers, and the operator's own patterns),
and the values of fields the operator marked private (`profile.payment`), which are withheld at
their source and also scrubbed from any text they were copied into: a user turn, a tool result,
the context a model generated. The scrub runs on the final text the child reads, so it holds
whatever the strategy picked; separators are matched loosely, so a number split over lines or
spaced out differently is still found.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .settings import BUILTIN_DETECTORS, RedactionSettings

__all__ = ["MIN_SCRUBBED_CHARS", "Redactor", "iban_valid", "luhn_valid", "marker"]

# A private field's value is scrubbed from free text only when it has at least this many
# letters and digits: shorter values ("no", "12") would erase unrelated words everywhere. They
# are still withheld at their source.
MIN_SCRUBBED_CHARS: Final = 4

# What may stand between the digits of a card number: spaces, line breaks (a number split over
# lines), dashes, dots, and quote marks of a replied-to email.
_DIGIT_GAP = r"[\s\-.>*_]{0,4}"
_CARD_CANDIDATE = re.compile(rf"(?<!\d)\d(?:{_DIGIT_GAP}\d){{12,}}(?!\d)")
_IBAN_CANDIDATE = re.compile(r"(?i)(?<![a-z0-9])[a-z]{2}\d{2}(?:[ \t\r\n\-]{0,3}[a-z0-9]){11,34}")

_LABELLED: Final[dict[str, re.Pattern[str]]] = {
    # A secret after its label: "password: …", "the PIN is …", and environment-style names
    # such as DB_PASSWORD=… or GITHUB_TOKEN=… (a bare "token" is too common a word).
    "password": re.compile(
        r"(?i)(?P<label>(?<![^\W_])(?:[a-z0-9]+[_-])*"
        r"(?:pass(?:word|wd|code|phrase)?|pwd|pin(?:\s*code)?|secret|api[ _-]?key|"
        r"(?:access|auth|[a-z0-9]+[_-])token|private[ _-]key)(?:[_-][a-z0-9]+)*\b"
        r"\s*(?:(?:is|was)\b\s*[:=]?|[:=])\s*)"
        r"(?P<value>(?!\[redacted)[^\s,;]+)"
    ),
    # The password of a URL such as postgres://app:secret@db.internal
    "url_password": re.compile(
        r"(?i)(?P<label>\b[a-z][a-z0-9+.\-]*://[^\s/:@]*:)(?P<value>(?!\[redacted)[^\s/@]+)(?=@)"
    ),
    "card_security_code": re.compile(
        r"(?i)(?P<label>\b(?:cvv2?|cvc2?|csc|security\s+code)\b\s*(?:is|[:=])?\s*)"
        r"(?P<value>\d{3,4})\b"
    ),
}
_WHOLE: Final[dict[str, tuple[re.Pattern[str], ...]]] = {
    "api_key": (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S
        ),
        re.compile(r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*"),
        re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
        re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+"),
    ),
    "us_ssn": (re.compile(r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)"),),
}


def marker(name: str) -> str:
    """What a redacted value is replaced with: names the rule, never the value."""
    return f"[redacted: {name}]"


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check every payment card number passes."""
    total = 0
    for i, char in enumerate(reversed(digits)):
        value = int(char)
        if i % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """Whether letters and digits form an IBAN with a correct mod-97 check (ISO 13616)."""
    code = text.upper()
    if not (15 <= len(code) <= 34 and code[:2].isalpha() and code[2:4].isdigit()):
        return False
    moved = code[4:] + code[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int
    name: str


def _card_spans(text: str) -> Iterator[_Span]:
    # A card number starts and ends where a group of digits does: "2026 4111 1111 1111 1111"
    # hides one behind a reference number, while the digits inside "4111111111111112" are no
    # card. A group longer than any card number may have one glued into it, so inside such a
    # group every position counts as a start or an end.
    for candidate in _CARD_CANDIDATE.finditer(text):
        positions = [candidate.start() + i for i, c in enumerate(candidate.group()) if c.isdigit()]
        digits = "".join(text[p] for p in positions)
        starts: set[int] = set()
        ends: set[int] = set()
        breaks = [k for k in range(1, len(positions)) if positions[k] != positions[k - 1] + 1]
        for first, last in zip([0, *breaks], [*breaks, len(positions)], strict=True):
            starts.add(first)
            ends.add(last)
            if last - first > 19:
                starts.update(range(first, last))
                ends.update(range(first + 1, last + 1))
        start = 0
        while start + 13 <= len(digits):
            if start in starts:
                for length in range(min(19, len(digits) - start), 12, -1):
                    if start + length in ends and luhn_valid(digits[start : start + length]):
                        last = positions[start + length - 1] + 1
                        yield _Span(positions[start], last, "card_number")
                        start += length
                        break
                else:
                    start += 1
            else:
                start += 1


def _iban_spans(text: str) -> Iterator[_Span]:
    start = 0
    while (candidate := _IBAN_CANDIDATE.search(text, start)) is not None:
        positions = [candidate.start() + i for i, c in enumerate(candidate.group()) if c.isalnum()]
        code = "".join(text[p] for p in positions)
        # The candidate may run on into the next word; the longest prefix that checks out wins.
        # When none does, the next candidate may start inside this one ("ref AB12 DE89…").
        start = candidate.start() + 1
        for length in range(min(34, len(code)), 14, -1):
            if iban_valid(code[:length]):
                yield _Span(positions[0], positions[length - 1] + 1, "iban")
                start = positions[length - 1] + 1
                break


_CHECKED: Final[dict[str, Callable[[str], Iterator[_Span]]]] = {
    "card_number": _card_spans,
    "iban": _iban_spans,
}


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _leaves(item)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def _value_patterns(value: str) -> list[re.Pattern[str]]:
    """Patterns that find `value` in text however its separators were rewritten, plus each of
    its runs holding four or more digits on its own (a card's last four, an account number)."""
    runs = re.findall(r"[^\W_]+", value)
    if sum(len(run) for run in runs) < MIN_SCRUBBED_CHARS:
        return []
    joined = r"[\W_]{1,6}".join(_run_pattern(run) for run in runs)
    patterns = [re.compile(rf"(?<![^\W_]){joined}(?![^\W_])", re.IGNORECASE)]
    if len(runs) > 1:
        patterns += [
            re.compile(rf"(?<!\d){_run_pattern(run)}(?!\d)", re.IGNORECASE)
            for run in runs
            if sum(c.isdigit() for c in run) >= 4
        ]
    return patterns


def _run_pattern(run: str) -> str:
    """A run of letters and digits as a pattern; a run holding digits may be spaced out or
    dashed differently in the text ("245678901" written "245 678 901")."""
    if not any(c.isdigit() for c in run):
        return re.escape(run)
    return _DIGIT_GAP.join(re.escape(c) for c in run)


class Redactor:
    """Scrubs private values out of text, counting what it removed by rule name.

    Built from the settings and the parent's profile, whose private fields' values it learns;
    `counts` adds up over every `scrub`, for the record of what the child was not shown.
    """

    def __init__(
        self, settings: RedactionSettings, profile: Mapping[str, Any] | None = None
    ) -> None:
        self.settings = settings
        self.counts: Counter[str] = Counter()
        self._custom = {name: re.compile(p) for name, p in settings.patterns.items()}
        self._profile_fields = [
            tuple(f.split(".")[1:]) for f in settings.fields if f.startswith("profile.")
        ]
        self._bare_keys = {f for f in settings.fields if "." not in f}
        self._private_tools = {f[len("tool.") :] for f in settings.fields if f.startswith("tool.")}
        values: dict[str, tuple[str, re.Pattern[str]]] = {}
        for path, value in _walk(profile or {}, ()):
            field = self.private_field(path)
            if field is not None:
                for leaf in _leaves(value):
                    values.update((p.pattern, (field, p)) for p in _value_patterns(leaf))
        # Longer values first, so a whole value is replaced before its digit runs are.
        self._values = sorted(values.values(), key=lambda item: -len(item[1].pattern))

    def private_field(self, path: Sequence[str]) -> str | None:
        """The private field a profile key path falls under (`profile.payment`), or None."""
        for field in self._profile_fields:
            if tuple(path[: len(field)]) == field:
                return "profile." + ".".join(field)
        for key in path:
            if key in self._bare_keys:
                return key
        return None

    def private_tool(self, name: str) -> bool:
        """Whether the tool result `name` is marked private as a whole (`tool.<name>`)."""
        return name in self._private_tools

    def scrub(self, text: str) -> str:
        """`text` with every private value replaced by a marker naming the rule that caught it."""
        for field, pattern in self._values:
            text = self._sub(pattern, marker(field), field, text)
        for name in BUILTIN_DETECTORS:
            if name not in self.settings.builtin:
                continue
            if name in _LABELLED:
                text = self._sub_value(_LABELLED[name], name, text)
            elif name in _WHOLE:
                for pattern in _WHOLE[name]:
                    text = self._sub(pattern, marker(name), name, text)
            else:
                text = self._replace_spans(list(_CHECKED[name](text)), text)
        for name, pattern in self._custom.items():
            text = self._sub(pattern, marker(name), name, text)
        return text

    def _sub(self, pattern: re.Pattern[str], replacement: str, name: str, text: str) -> str:
        result, count = pattern.subn(lambda _: replacement, text)
        if count:
            self.counts[name] += count
        return result

    def _sub_value(self, pattern: re.Pattern[str], name: str, text: str) -> str:
        result, count = pattern.subn(lambda m: m.group("label") + marker(name), text)
        if count:
            self.counts[name] += count
        return result

    def _replace_spans(self, spans: list[_Span], text: str) -> str:
        for span in sorted(spans, key=lambda s: s.start, reverse=True):
            text = text[: span.start] + marker(span.name) + text[span.end :]
            self.counts[span.name] += 1
        return text


def _walk(value: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each key path of a nested profile with its value, parents before children."""
    for key, item in value.items():
        here = (*path, str(key))
        yield here, item
        if isinstance(item, Mapping):
            yield from _walk(item, here)
