"""Adaptive selection (the chapter's exercise 6): pick a strategy from the task and the data.

The rules, first match wins:

1. The parent named what to share → `manual`.
2. The parent has nothing to share (no history, profile or tool results) → `minimal`.
3. A short task (at most `short_task_words` words) that refers to no earlier conversation and is
   not complex → `minimal`: the chapter's simple, frequent calls (weather, a calculator).
4. Private data in the parent's context and a self-contained task → `minimal`: nothing to gain
   from sharing, something to lose.
5. A complex task (a report, customer support, a review…), or private data with a task that
   needs the conversation → `llm` when a context model is given, with the private fields
   forbidden; `automatic` otherwise.
6. A task that refers to earlier conversation ("as discussed", "the file above") → `automatic`.
7. Anything else → `automatic`, the chapter's default for tasks of medium complexity.

Each choice comes with its reasons, in words, for the parent's trajectory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ..discovery.tokenize import STOPWORDS
from .child_context import ConcreteStrategy
from .parent_view import ManualShare, ParentView
from .redaction import Redactor
from .settings import AdaptiveSettings, RedactionSettings

__all__ = ["StrategyChoice", "choose_strategy", "private_kinds"]


@dataclass(frozen=True, slots=True)
class StrategyChoice:
    """The chosen strategy, why, and (for `llm`) the private fields the context model is told
    to leave out, beyond those the settings already forbid."""

    strategy: ConcreteStrategy
    reasons: tuple[str, ...]
    forbidden: tuple[str, ...] = ()


def _found(phrases: tuple[str, ...], text: str) -> list[str]:
    found = []
    for phrase in phrases:
        # Latin phrases match at word starts ("analy" finds "analysis"); CJK ones anywhere.
        bounded = phrase.isascii()
        pattern = rf"(?i)\b{re.escape(phrase)}" if bounded else re.escape(phrase)
        if re.search(pattern, text):
            found.append(phrase)
    return found


# Words too common to show that a task builds on the conversation: the discovery index's stop
# words, and the words of delegation itself.
_COMMON_WORDS: Final = STOPWORDS | frozenset(
    {"agent", "check", "list", "next", "send", "take", "task", "today", "tomorrow", "user"}
    | {"week", "write"}
)
_CONTENT_WORD = re.compile(r"[^\W\d_]{4,}")


def _content_words(text: str) -> set[str]:
    return {word for word in _CONTENT_WORD.findall(text.lower()) if word not in _COMMON_WORDS}


def _shared_words(view: ParentView) -> list[str]:
    """The task's content words that the conversation or the tool results also use."""
    seen: set[str] = set()
    for message in view.messages:
        if message.role != "system":
            seen |= _content_words(message.content)
    for text in view.tool_results.values():
        seen |= _content_words(text)
    return sorted(_content_words(view.task) & seen)


def _words(text: str) -> int:
    # CJK text has no spaces: about two characters make a word.
    latin = len(re.findall(r"[^\W\u3000-\u9fff]+", text))
    cjk = len(re.findall(r"[\u3000-\u9fff]", text))
    return latin + (cjk + 1) // 2


def private_kinds(view: ParentView, settings: RedactionSettings) -> list[str]:
    """The kinds of private data in the parent's view (rule and field names, never values)."""
    redactor = Redactor(settings, view.profile)
    kinds: set[str] = set()
    for path in _profile_paths(view.profile):
        field = redactor.private_field(path)
        if field is not None:
            kinds.add(field)
    kinds |= {f"tool.{name}" for name in view.tool_results if redactor.private_tool(name)}
    texts = [view.task, *(m.content for m in view.messages if m.role != "system")]
    texts += view.tool_results.values()
    texts += [f"{key}: {value}" for key, value in view.profile.items()]
    for text in texts:
        redactor.scrub(text)
    kinds |= set(redactor.counts)
    return sorted(kinds)


def _profile_paths(profile: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if not isinstance(profile, Mapping):
        return []
    paths: list[tuple[str, ...]] = []
    for key, value in profile.items():
        paths.append((*prefix, str(key)))
        paths += _profile_paths(value, (*prefix, str(key)))
    return paths


def choose_strategy(
    view: ParentView,
    settings: AdaptiveSettings,
    redaction: RedactionSettings,
    *,
    share: ManualShare | None,
    has_model: bool,
    forbidden: tuple[str, ...] = (),
) -> StrategyChoice:
    """The strategy for this delegation by the rules above, with the reasons."""
    if share is not None and not share.empty:
        return StrategyChoice("manual", (f"the parent named what to share ({share.describe()})",))
    if not (view.messages or view.profile or view.tool_results):
        return StrategyChoice("minimal", ("the parent has no conversation, profile or results",))
    references = _found(settings.reference_phrases, view.task)
    complex_words = _found(settings.complex_task_words, view.task)
    words = _words(view.task)
    private = private_kinds(view, redaction)
    refers = f"the task refers to earlier conversation ({', '.join(map(repr, references))})"
    shared = _shared_words(view) if settings.shared_words else []
    if not references and len(shared) >= settings.shared_words > 0:
        references = shared
        refers = f"the task builds on the conversation (shared words: {', '.join(shared)})"
    is_complex = f"the task is complex ({', '.join(map(repr, complex_words))})"
    holds_private = f"the parent's context holds private data ({', '.join(private)})"
    if not references and not complex_words and words <= settings.short_task_words:
        reasons = [
            f"a short self-contained task ({words} words, no reference to earlier conversation)"
        ]
        if private:
            reasons.append(holds_private)
        return StrategyChoice("minimal", tuple(reasons))
    if private and not references and not complex_words:
        return StrategyChoice(
            "minimal", (holds_private, "the task is self-contained, so nothing needs to cross")
        )
    if complex_words or (private and references):
        reasons = [is_complex] if complex_words else []
        if references:
            reasons.append(refers)
        if private:
            reasons.append(holds_private)
        if has_model:
            # Private values are scrubbed before the model reads anything; the names of private
            # fields are forbidden too, so it leaves out what it might infer about them.
            fields = tuple(
                kind.rsplit(".", 1)[-1]
                for kind in private
                if not kind.startswith("tool.")
                and (kind.startswith("profile.") or kind in redaction.fields)
            )
            kept_out = tuple(dict.fromkeys((*forbidden, *fields)))
            if private:
                reasons.append(
                    "the context model reads the conversation with private values scrubbed"
                )
            if kept_out:
                reasons.append(f"the context model is told to leave out {', '.join(kept_out)}")
            return StrategyChoice("llm", tuple(reasons), fields)
        reasons.append("no context model was given, so automatic trimming with redaction")
        return StrategyChoice("automatic", tuple(reasons))
    if references:
        return StrategyChoice("automatic", (refers,))
    return StrategyChoice(
        "automatic", (f"a self-contained task of medium size ({words} words): the default",)
    )
