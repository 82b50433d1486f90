"""Output shaping: how a tool hands a long result to a model without silently losing any of it.

Three pieces, each for one way a result can be too big:

* :func:`cut_visibly` keeps the head (and, where the end matters, the tail) of a long text and
  puts a marker where it cut that says how many characters are missing and how to read them.
  A cut is never silent.
* :class:`Cursor` makes the opaque page tokens of paginated tools: URL-safe base64 of a small
  JSON object that carries the position and a fingerprint of the tool and its query, so that a
  cursor given to another tool or with other arguments is refused instead of misread.
* :class:`Compressor` is the hook for an optional query-aware compression step (a small model
  that keeps what matters for the question asked). It must say when it was applied; the default,
  :data:`NO_COMPRESSION`, never applies. :class:`ModelCompressor` is the small-model one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

import anyio

from ..errors import ModelAPIError, ToolError, UserError
from ..messages import SystemMessage, UserMessage
from ..models.base import Model, ModelRequest

__all__ = [
    "COMPRESSION_PROMPT",
    "DEFAULT_LIMIT",
    "NO_COMPRESSION",
    "Compressed",
    "Compressor",
    "Cursor",
    "ModelCompressor",
    "NoCompression",
    "ShapedText",
    "cut_visibly",
    "shape",
]

log = logging.getLogger(__name__)

DEFAULT_LIMIT: Final = 10_000
# When a cut point has a line break this close before it (a fifth of the kept part), cut there
# instead, so that the model does not see half a line.
_LINE_SNAP_SHARE: Final = 5


@dataclass(frozen=True, slots=True)
class ShapedText:
    """A text as a model will see it, and what was left out of it.

    `omitted_start`/`omitted_end` are offsets into the original text; they are equal when
    nothing was omitted. `compression_declined` says why a compressor that was asked did not
    shape the text (it then was cut instead).
    """

    text: str
    original_chars: int
    omitted_start: int
    omitted_end: int
    compression_note: str = ""
    compression_declined: str = ""

    @property
    def omitted_chars(self) -> int:
        return self.omitted_end - self.omitted_start

    @property
    def truncated(self) -> bool:
        return self.omitted_end > self.omitted_start

    @property
    def compressed(self) -> bool:
        return bool(self.compression_note)

    def __str__(self) -> str:
        return self.text


def cut_visibly(
    text: str,
    limit: int = DEFAULT_LIMIT,
    *,
    how_to_get_more: str,
    tail_chars: int = 0,
) -> ShapedText:
    """Cut `text` to at most `limit` characters, marker included, saying what was cut.

    The head is kept, and the last `tail_chars` characters too when the end matters (the last
    lines of a log, the summary line of a test run). Cuts move back to a line break when one is
    close. In the middle goes a marker such as
    ``[… 12,345 characters omitted; pass offset=10000 to read them]``: `how_to_get_more` says how
    to read the rest, and its ``{offset}`` and ``{end}`` are replaced by the offsets of the first
    omitted character and of the one after the last.
    """
    if tail_chars < 0:
        raise UserError(f"tail_chars must be 0 or more, got {tail_chars}.")
    total = len(text)
    if total <= limit:
        return ShapedText(text, total, total, total)
    # Reserve room for the longest marker this text can need, so the result never exceeds limit.
    reserve = len(_marker(total, how_to_get_more, total, total))
    budget = limit - reserve
    if budget < 1:
        raise UserError(
            f"A limit of {limit} characters leaves no room for the text once the "
            f"{reserve}-character omission marker is in. Give a limit of at least {reserve + 1}, "
            "or a shorter how_to_get_more."
        )
    tail = min(tail_chars, budget // 2)
    head_end = _snap_back(text, budget - tail)
    tail_start = _snap_forward(text, total - tail, total) if tail else total
    marker = _marker(tail_start - head_end, how_to_get_more, head_end, tail_start)
    # The marker stands on a line of its own; the line breaks it needs are part of the reserve.
    if head_end == 0 or text[head_end - 1] == "\n":
        marker = marker.removeprefix("\n")
    if tail_start == total:
        marker = marker.removesuffix("\n")
    shaped = text[:head_end] + marker + text[tail_start:]
    return ShapedText(shaped, total, head_end, tail_start)


def _marker(omitted: int, how_to_get_more: str, start: int, end: int) -> str:
    how = how_to_get_more.replace("{offset}", str(start)).replace("{end}", str(end))
    return f"\n[… {omitted:,} characters omitted; {how}]\n"


def _snap_back(text: str, end: int) -> int:
    """`end`, or just after a line break in the fifth of the kept part before it."""
    if end <= 0:
        return 0
    newline = text.rfind("\n", end - max(1, end // _LINE_SNAP_SHARE), end)
    return newline + 1 if newline >= 0 else end


def _snap_forward(text: str, start: int, total: int) -> int:
    """`start`, or just after a line break in the first fifth of the kept tail."""
    window = max(1, (total - start) // _LINE_SNAP_SHARE)
    newline = text.find("\n", start, start + window)
    return newline + 1 if 0 <= newline < total - 1 else start


# --- cursors -------------------------------------------------------------------------------------


_CURSOR_VERSION: Final = 1


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Cursor:
    """Page cursors of one tool and one query (the arguments that define the listing).

    `encode(position)` gives an opaque string for the model to pass back; `decode(cursor)` gives
    the position back, or raises :class:`ToolError` telling the model to start over without a
    cursor if the string is malformed or was made for another tool or query.
    """

    tool: str
    query: Mapping[str, Any]

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(_canonical_json([self.tool, dict(self.query)]).encode())
        return digest.hexdigest()[:16]

    def encode(self, position: Mapping[str, Any]) -> str:
        payload = {"v": _CURSOR_VERSION, "f": self.fingerprint, "p": dict(position)}
        raw = _canonical_json(payload).encode()
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def decode(self, cursor: str) -> dict[str, Any]:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            payload = json.loads(raw)
        except (binascii.Error, ValueError) as exc:
            raise self._refused(cursor, "it is not a cursor this tool gave") from exc
        if not isinstance(payload, dict) or payload.get("v") != _CURSOR_VERSION:
            raise self._refused(cursor, "it is not a cursor this tool gave")
        position = payload.get("p")
        if payload.get("f") != self.fingerprint or not isinstance(position, dict):
            raise self._refused(cursor, "it was given for another tool or other arguments")
        return position

    def _refused(self, cursor: str, why: str) -> ToolError:
        shown = cursor if len(cursor) <= 40 else cursor[:39] + "…"
        return ToolError(
            f"The cursor {shown!r} cannot be used with {self.tool} and these arguments: {why}. "
            f"Call {self.tool} again without a cursor to start from the first page, and pass "
            "back only the cursor of its latest result, with the same other arguments."
        )


# --- query-aware compression ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Compressed:
    """What a compressor made of a text. When it `applied`, `note` must say so, in words the
    model reads (what was compressed, by what, for which question)."""

    text: str
    applied: bool
    note: str = ""

    def __post_init__(self) -> None:
        if self.applied and not self.note.strip():
            raise UserError(
                "A compressor applied compression without a note. Say what was done, e.g. "
                "Compressed(text, applied=True, note='Compressed from 40,000 characters by a "
                "small model, keeping what answers: failing tests').",
            )


@runtime_checkable
class Compressor(Protocol):
    """An optional step that shortens a long result with the model's question in mind."""

    async def compress(self, text: str, *, query: str, limit: int) -> Compressed: ...


class NoCompression:
    """The default compressor: leaves every text as it is and says it did nothing."""

    async def compress(self, text: str, *, query: str, limit: int) -> Compressed:
        return Compressed(text, applied=False)


NO_COMPRESSION: Final[Compressor] = NoCompression()


async def shape(
    text: str,
    limit: int = DEFAULT_LIMIT,
    *,
    how_to_get_more: str,
    query: str | None = None,
    compressor: Compressor = NO_COMPRESSION,
    tail_chars: int = 0,
) -> ShapedText:
    """Fit a result into `limit` characters: compress it for `query` if a compressor applies,
    else cut it visibly. A compression is announced at the top of the text; a compressed text
    that still does not fit is dropped for a visible cut of the original, whose omission marker
    can point at offsets the model can read. When a compressor gives a reason for not applying
    (or its result did not fit), a line at the top says compression was not applied and why.
    """
    if len(text) <= limit:
        return ShapedText(text, len(text), len(text), len(text))
    declined = ""
    if query is not None:
        result = await compressor.compress(text, query=query, limit=limit)
        if result.applied:
            note = " ".join(result.note.split())
            announced = f"[{note}]\n{result.text}"
            if len(announced) <= limit:
                # Nothing was cut, but nothing of the original is shown verbatim either: the
                # note, not an omitted range, tells what happened.
                return ShapedText(announced, len(text), 0, 0, compression_note=note)
            declined = (
                f"its {len(announced):,}-character result did not fit in {limit:,} characters"
            )
        else:
            # A compressor that did nothing says why in its note, if it has a reason to give;
            # NoCompression has none, and its cut stays exactly a plain visible cut.
            declined = " ".join(result.note.split())
    header = f"[Compression was not applied: {declined}. The result is cut instead.]\n"
    if not declined or len(header) > limit // 2:
        return cut_visibly(text, limit, how_to_get_more=how_to_get_more, tail_chars=tail_chars)
    cut = cut_visibly(
        text, limit - len(header), how_to_get_more=how_to_get_more, tail_chars=tail_chars
    )
    return ShapedText(
        header + cut.text,
        cut.original_chars,
        cut.omitted_start,
        cut.omitted_end,
        compression_declined=declined,
    )


COMPRESSION_PROMPT = (
    "You shorten a tool's output for an agent that asked a question. Keep only what answers "
    "the query: the lines, numbers, names and errors it needs. Quote exact lines and numbers "
    "verbatim; never paraphrase them, never invent or guess anything that is not in the text. "
    "If nothing in the text answers the query, say so in one line. Answer with the shortened "
    "text only, no preamble."
)


class ModelCompressor:
    """Query-aware compression by a small model.

    Any failure (a provider error, no answer within `timeout` seconds, an empty answer, or one
    that does not fit) means "not applied", with the reason in the note, so :func:`shape` cuts
    the original visibly instead; the agent never waits long for it nor gets an invented text.
    """

    def __init__(
        self,
        model: Model,
        *,
        timeout: float = 10.0,
        max_output_chars: int = 4000,
        max_input_chars: int = 100_000,
    ):
        if timeout <= 0:
            raise UserError(f"timeout must be more than 0 seconds, got {timeout}.")
        if max_output_chars < 1:
            raise UserError(f"max_output_chars must be 1 or more, got {max_output_chars}.")
        if max_input_chars < 1:
            raise UserError(f"max_input_chars must be 1 or more, got {max_input_chars}.")
        self.model = model
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        # A small model's context is small: it is given at most this much of the result.
        self.max_input_chars = max_input_chars

    async def compress(self, text: str, *, query: str, limit: int) -> Compressed:
        budget = min(limit, self.max_output_chars)
        given = text[: self.max_input_chars]
        seen = (
            f"the first {len(given):,} of {len(text):,}"
            if len(given) < len(text)
            else f"{len(text):,}"
        )
        request = ModelRequest(
            messages=[
                SystemMessage(content=COMPRESSION_PROMPT),
                UserMessage(
                    content=(
                        f"Query: {query}\n"
                        f"Answer in at most {budget:,} characters.\n\n"
                        f"Text ({seen} characters):\n{given}"
                    )
                ),
            ]
        )
        name = self.model.name
        with anyio.move_on_after(self.timeout):
            try:
                end = await self.model.complete(request)
            except ModelAPIError as exc:
                log.warning("compression by %s failed, cutting instead: %s", name, exc)
                return Compressed(text, applied=False, note=f"the model {name} failed ({exc})")
            answer = end.message.content.strip()
            if not answer:
                return Compressed(text, applied=False, note=f"the model {name} gave no answer")
            note = (
                f"Compressed by {name} for the query: {query}; {seen} → {len(answer):,} "
                "characters. The full result: call the tool again with offset/limit or a "
                "narrower query."
            )
            if len(answer) > budget or len(answer) + len(note) + 3 > limit:
                return Compressed(
                    text,
                    applied=False,
                    note=f"the model {name} answered with {len(answer):,} characters, over "
                    f"the {budget:,} asked for",
                )
            return Compressed(answer, applied=True, note=note)
        log.warning("compression by %s timed out after %.1fs; cutting instead", name, self.timeout)
        return Compressed(
            text, applied=False, note=f"the model {name} did not answer within {self.timeout:g}s"
        )
