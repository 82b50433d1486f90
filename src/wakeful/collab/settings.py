"""How a parent chooses what a child agent reads: the context strategy and its settings.

The same :class:`ContextSettings` is written once per agent definition (`[agents.context]` in
`wakeful.toml`) and narrowed per delegation by a :class:`CallContextSettings`, whose fields are
all optional: `settings.with_call(call)` is the agent's settings with the call's values on top.
Every default works without configuration; the docstrings below name them.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "BUILTIN_DETECTORS",
    "STRATEGIES",
    "AdaptiveSettings",
    "AutomaticSettings",
    "CallContextSettings",
    "ContextSettings",
    "GeneratedContextSettings",
    "RedactionSettings",
    "StrategyName",
]

StrategyName = Literal["minimal", "manual", "automatic", "llm", "adaptive"]
# The four strategies of the chapter, then `adaptive`, which picks one of them per task.
STRATEGIES: Final = ("minimal", "manual", "automatic", "llm", "adaptive")

# The detectors of private values every redaction runs unless `builtin` names fewer.
# They run in this order: an IBAN is caught whole before its digits could pass for a card number.
BUILTIN_DETECTORS: Final = (
    "api_key",
    "password",
    "url_password",
    "card_security_code",
    "iban",
    "card_number",
    "us_ssn",
)


def _strategy(value: object) -> object:
    if isinstance(value, str) and value not in STRATEGIES:
        raise ValueError(
            f"unknown context strategy {value!r}: choose one of minimal (only the task), "
            "manual (the parent names what to share), automatic (profile + recent turns + "
            "named tool results, trimmed) or llm (a model writes the context), or adaptive to "
            "let wakeful pick one per task"
        )
    return value


def _private_fields(value: tuple[str, ...]) -> tuple[str, ...]:
    for field in value:
        parts = field.split(".")
        if any(not part for part in parts):
            raise ValueError(
                f"private field {field!r} is not a dotted key: write `profile.payment`, "
                "`password` or `tool.<name>`"
            )
        if parts[0] == "tool" and len(parts) != 2:
            raise ValueError(
                f"private field {field!r} names a tool result: write `tool.<name>` with "
                "the whole result's name"
            )
    return value


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AutomaticSettings(_Settings):
    """The `automatic` strategy's rules (the chapter's "profile + last 3 turns + tool results").

    `profile`: share the user's profile facts (private fields are always withheld).
    `last_turns`: how many of the parent's most recent turns to share; a turn starts at each
    user message; 0 shares no history.
    `tool_results`: the names of the tool results to share; `None` (the default) shares every
    named result the parent passed, `[]` none.
    `item_tokens`: the most one item (a turn, a result, a fact) may take before it is cut.
    """

    profile: bool = True
    last_turns: int = Field(default=3, ge=0)
    tool_results: tuple[str, ...] | None = None
    item_tokens: int = Field(default=400, gt=0)


class GeneratedContextSettings(_Settings):
    """The `llm` strategy: one model call writes a structured context for the child.

    `business_rules`: instructions for the context writer ("never pass payment details").
    `forbidden_fields`: kinds of data the context must not carry (e.g. `payment`); the model is
    told so, a profile key of that name is withheld, and a generated item naming it is dropped.
    `summarize_after_turns`: beyond this many turns the model is asked for a summary only (the
    chapter's "over 10 turns, pass only a summary").
    `max_input_tokens`: the most of the parent's trajectory sent to the context writer; older
    messages are left out first.
    `max_output_tokens`: the writer's answer limit.
    """

    business_rules: tuple[str, ...] = ()
    forbidden_fields: tuple[str, ...] = ()
    summarize_after_turns: int = Field(default=10, ge=0)
    max_input_tokens: int = Field(default=8000, gt=0)
    max_output_tokens: int = Field(default=1000, gt=0)


class AdaptiveSettings(_Settings):
    """The rules `adaptive` chooses by (see :mod:`wakeful.collab.adaptive`).

    `short_task_words`: a task of at most this many words with no reference to earlier
    conversation is self-contained and gets `minimal`.
    `reference_phrases`: phrases that mean the task needs the conversation ("as discussed").
    `complex_task_words`: words that mark a task complex enough for `llm` when a model is given.
    `shared_words`: a task that shares at least this many content words with the conversation
    and tool results builds on them, like a reference phrase; 0 turns this rule off.
    """

    short_task_words: int = Field(default=25, ge=0)
    shared_words: int = Field(default=2, ge=0)
    reference_phrases: tuple[str, ...] = (
        "as discussed",
        "as we discussed",
        "we discussed",
        "the user",
        "their",
        "as mentioned",
        "mentioned earlier",
        "mentioned above",
        "discussed earlier",
        "earlier conversation",
        "earlier message",
        "see above",
        "the file above",
        "the code above",
        "the one above",
        "listed above",
        "previous",
        "like last time",
        "the user's",
        "the user asked",
        "they asked",
        "we talked about",
        "that one",
        "same as",
        "之前",
        "上面",
        "剛才",
    )
    complex_task_words: tuple[str, ...] = (
        "report",
        "analy",
        "summar",
        "customer",
        "support",
        "complaint",
        "refund",
        "plan",
        "itinerary",
        "review",
        "investigat",
        "draft",
        "negotiat",
        "報告",
        "客服",
    )


class RedactionSettings(_Settings):
    """What counts as private: nothing it matches reaches a child, under any strategy.

    `builtin`: the detectors to run (all of :data:`BUILTIN_DETECTORS` by default).
    `patterns`: extra regular expressions by name, e.g. `{"order_pin": "PIN-\\d{6}"}`.
    `fields`: private fields of the parent's view: `profile.payment` (a profile key, nested keys
    dotted), a bare key such as `password` (that key anywhere in the profile), or
    `tool.<name>` (a whole tool result). Their values are withheld, and scrubbed wherever they
    appear in the child's text.
    """

    builtin: tuple[str, ...] = BUILTIN_DETECTORS
    patterns: dict[str, str] = Field(default_factory=dict)
    fields: tuple[str, ...] = ()

    @field_validator("builtin")
    @classmethod
    def _known_detectors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [name for name in value if name not in BUILTIN_DETECTORS]
        if unknown:
            raise ValueError(
                f"unknown built-in detector(s) {', '.join(map(repr, unknown))}: the built-in "
                f"detectors are {', '.join(BUILTIN_DETECTORS)}; add your own under `patterns`"
            )
        return value

    @field_validator("patterns")
    @classmethod
    def _patterns_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            if not pattern:
                raise ValueError(f"pattern {name!r} is empty, which would match everywhere")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"pattern {name!r} is not a valid regular expression ({exc}): "
                    f"{pattern!r}; fix it or remove it"
                ) from exc
            if compiled.fullmatch(""):
                raise ValueError(
                    f"pattern {name!r} ({pattern!r}) matches the empty string, so it would "
                    "match everywhere; make it require at least one character"
                )
        return value

    _check_fields = field_validator("fields")(_private_fields)


class ContextSettings(_Settings):
    """What a child reads: the strategy and each strategy's rules (per agent definition).

    `budget_tokens` bounds what is shared besides the task (the task itself is never cut):
    items are shortened, then the least important left out, until it fits.
    """

    strategy: StrategyName = "adaptive"
    budget_tokens: int = Field(default=2000, ge=0)
    automatic: AutomaticSettings = AutomaticSettings()
    generated: GeneratedContextSettings = GeneratedContextSettings()
    adaptive: AdaptiveSettings = AdaptiveSettings()
    redaction: RedactionSettings = RedactionSettings()

    _check_strategy = field_validator("strategy", mode="before")(_strategy)

    def with_call(self, call: CallContextSettings | None) -> ContextSettings:
        """These settings with a delegation's own choices on top."""
        if call is None:
            return self
        automatic = self.automatic.model_copy(
            update={
                key: value
                for key, value in (
                    ("last_turns", call.last_turns),
                    ("tool_results", call.tool_results),
                )
                if value is not None
            }
        )
        redaction = self.redaction.model_copy(
            update={"fields": tuple(dict.fromkeys((*self.redaction.fields, *call.private_fields)))}
        )
        generated = self.generated.model_copy(
            update={
                "business_rules": (*self.generated.business_rules, *call.business_rules),
                "forbidden_fields": tuple(
                    dict.fromkeys((*self.generated.forbidden_fields, *call.forbidden_fields))
                ),
            }
        )
        return self.model_copy(
            update={
                "strategy": call.strategy or self.strategy,
                "budget_tokens": (
                    self.budget_tokens if call.budget_tokens is None else call.budget_tokens
                ),
                "automatic": automatic,
                "generated": generated,
                "redaction": redaction,
            }
        )


class CallContextSettings(_Settings):
    """One delegation's choices, over its agent definition's :class:`ContextSettings`.

    Unset fields keep the agent's value. Private fields, business rules and forbidden fields are
    added to the agent's, never replace them: a call cannot make private data shareable.
    """

    strategy: StrategyName | None = None
    budget_tokens: int | None = Field(default=None, ge=0)
    last_turns: int | None = Field(default=None, ge=0)
    tool_results: tuple[str, ...] | None = None
    private_fields: tuple[str, ...] = ()
    business_rules: tuple[str, ...] = ()
    forbidden_fields: tuple[str, ...] = ()

    _check_strategy = field_validator("strategy", mode="before")(_strategy)

    _check_private_fields = field_validator("private_fields")(_private_fields)
