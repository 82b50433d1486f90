"""Prepare what a child agent reads: the one entry point of the context strategies.

    context = await prepare_child_context(view, agent_settings, call=call_settings, model=model)
    child_trajectory.append(context.as_message())
    parent_note = context.record.summary()

The strategy comes from the settings (per agent definition, narrowed per call); `adaptive`
chooses one of the four per task. Whatever was chosen, private fields are withheld at their
source, the context model (if any) only ever sees scrubbed text, and the final text is scrubbed
again before it is returned.
"""

from __future__ import annotations

from functools import partial

import anyio

from ..errors import UserError
from ..models import Model
from .adaptive import choose_strategy
from .child_context import Candidate, ChildContext, ConcreteStrategy, ContextRecord, assemble
from .generated_context import Generation, generate_context
from .parent_view import ManualShare, ParentView
from .redaction import Redactor
from .settings import CallContextSettings, ContextSettings
from .strategies import automatic_candidates, manual_candidates

__all__ = ["prepare_child_context"]


def _redaction_for(settings: ContextSettings) -> ContextSettings:
    """Forbidden fields of the context writer are private fields for every strategy."""
    forbidden = settings.generated.forbidden_fields
    if not forbidden:
        return settings
    fields = tuple(dict.fromkeys((*settings.redaction.fields, *forbidden)))
    redaction = settings.redaction.model_copy(update={"fields": fields})
    return settings.model_copy(update={"redaction": redaction})


async def prepare_child_context(
    view: ParentView,
    settings: ContextSettings | None = None,
    *,
    call: CallContextSettings | None = None,
    share: ManualShare | None = None,
    model: Model | None = None,
) -> ChildContext:
    """The child's context under the strategy the settings ask for (see the module docstring).

    `share` is the `manual` strategy's list; `model` writes the context under `llm` (it is the
    one extra model call; tests pass a `FunctionModel`).
    """
    settings = _redaction_for((settings or ContextSettings()).with_call(call))
    requested = settings.strategy
    strategy: ConcreteStrategy
    reasons: list[str] = []
    if requested == "adaptive":
        choice = await anyio.to_thread.run_sync(
            partial(
                choose_strategy,
                view,
                settings.adaptive,
                settings.redaction,
                share=share,
                has_model=model is not None,
                forbidden=settings.generated.forbidden_fields,
            )
        )
        strategy, reasons = choice.strategy, list(choice.reasons)
        if choice.forbidden:
            forbidden = (*settings.generated.forbidden_fields, *choice.forbidden)
            generated = settings.generated.model_copy(
                update={"forbidden_fields": tuple(dict.fromkeys(forbidden))}
            )
            settings = settings.model_copy(update={"generated": generated})
    else:
        strategy = requested
        reasons = ["the settings ask for it"]
    if strategy == "manual" and (share is None or share.empty):
        raise UserError(
            "The manual context strategy needs a list of what to share (messages, tool_results, "
            "profile_keys or notes). Name at least one, or choose minimal to pass only the task."
        )
    if strategy == "llm" and model is None:
        raise UserError(
            "The llm context strategy needs a model to write the context: pass model=…, or "
            "choose automatic, which needs none."
        )
    record = ContextRecord(requested=requested, strategy=strategy, reasons=reasons)
    generation: Generation | None = None
    if strategy == "llm":
        assert model is not None
        # A separate redactor scrubs the writer's input, so the record counts only what was
        # removed from the child's own text.
        writer_redactor = Redactor(settings.redaction, view.profile)
        generation = await generate_context(view, settings.generated, writer_redactor, model)
    # Scrubbing is plain CPU work that grows with the parent's history (about 1 s for 1 MB of
    # text): it runs on a worker thread, so the event loop stays free.
    return await anyio.to_thread.run_sync(
        partial(_build, view, settings, strategy, share, generation, record)
    )


def _build(
    view: ParentView,
    settings: ContextSettings,
    strategy: ConcreteStrategy,
    share: ManualShare | None,
    generation: Generation | None,
    record: ContextRecord,
) -> ChildContext:
    redactor = Redactor(settings.redaction, view.profile)
    candidates: list[Candidate] = []
    if strategy == "manual":
        assert share is not None
        candidates = manual_candidates(view, share, redactor, record)
    elif generation is not None:
        record.model_calls = generation.calls
        record.model_seconds = generation.seconds
        record.withheld += generation.dropped
        if generation.failure is None:
            candidates = generation.candidates
        else:
            record.strategy = "automatic"
            record.fallback = generation.failure
            candidates = _automatic(view, settings, redactor, record)
    elif strategy == "automatic":
        candidates = _automatic(view, settings, redactor, record)
    return assemble(
        candidates,
        view.task,
        budget=settings.budget_tokens,
        redactor=redactor,
        record=record,
    )


def _automatic(
    view: ParentView, settings: ContextSettings, redactor: Redactor, record: ContextRecord
) -> list[Candidate]:
    return automatic_candidates(view, settings.automatic, redactor, record)
