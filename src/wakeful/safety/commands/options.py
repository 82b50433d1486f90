"""Reading a command's options the way most Unix tools do: `-rf` clusters, `--long`,
`--long=value`, options that take the next word, and `--` ending the options."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .words import Word

__all__ = ["has_option", "operands", "option_values"]


def _is_option(word: Word) -> bool:
    value = word.value
    return value is not None and value.startswith("-") and value != "-"


def operands(args: Sequence[Word], takes_value: Iterable[str] = ()) -> list[Word]:
    """The words that are not options (dynamic words count as operands: they may be either)."""
    needs_value = frozenset(takes_value)
    found: list[Word] = []
    skip = False
    ended = False
    for word in args:
        if skip:
            skip = False
            continue
        if ended or not _is_option(word):
            found.append(word)
            continue
        value = word.value or ""
        if value == "--":
            ended = True
        elif value in needs_value:
            skip = True
    return found


def has_option(
    args: Sequence[Word], short: str = "", long: Iterable[str] = (), takes_value: Iterable[str] = ()
) -> bool:
    """Whether any of the short option letters (in a cluster like `-rf`) or long options
    (`--force`, also as `--force=…`) is given before `--`."""
    longs = frozenset(long)
    needs_value = frozenset(takes_value)
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if not _is_option(word):
            continue
        value = word.value or ""
        if value == "--":
            return False
        if value.startswith("--"):
            if value.split("=", 1)[0] in longs:
                return True
        elif any(letter in value[1:] for letter in short):
            return True
        if value in needs_value:
            skip = True
    return False


def option_values(args: Sequence[Word], names: Iterable[str]) -> list[Word]:
    """The values given to the named options, as `-o FILE`, `-oFILE` (short) or `--out=FILE`."""
    wanted = frozenset(names)
    found: list[Word] = []
    for i, word in enumerate(args):
        value = word.value
        if value is None or not value.startswith("-"):
            continue
        if value == "--":
            break
        if value in wanted:
            if i + 1 < len(args):
                found.append(args[i + 1])
            continue
        if value.startswith("--") and "=" in value:
            name, _, rest = value.partition("=")
            if name in wanted:
                found.append(Word(word.text, rest, word.glob))
            continue
        if not value.startswith("--") and len(value) > 2 and value[:2] in wanted:
            found.append(Word(word.text, value[2:], word.glob))
    return found
