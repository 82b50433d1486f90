"""A session's settings, and the hooks of whoever shows it as it runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..events import DEFAULT_MAX_EVENT_BYTES
from ..messages import Message
from ..models.base import StreamPart
from ..tools.shaping import Compressor


@dataclass(frozen=True)
class SessionConfig:
    system_prompt: str = "You are a helpful assistant."
    # Plain assistant text stays in the trajectory; reply_to_user is how the agent talks.
    send_assistant_text: bool = False
    max_model_requests_per_activation: int = 50
    # A stop also cancels this session's background tasks ("stop everything").
    stop_cancels_background: bool = True
    # How long a cancelled tool may take to clean up before the loop moves on.
    cancel_grace_seconds: float = 5.0
    parallel_max_steps: int = 4
    # Optional query-aware compression of tool results longer than compress_over_chars; without
    # a compressor, results are recorded as the tools gave them (tools cut their own output).
    compressor: Compressor | None = None
    compress_over_chars: int = 10_000
    # A model request that fails unexpectedly (not a provider's ModelAPIError, which the
    # adapters already retry) or whose stream is silent for model_stream_idle_seconds is tried
    # again this many times, waiting model_fault_backoff_seconds, doubling each time; then the
    # session pauses until its next event and the operator is alerted.
    model_fault_retries: int = 2
    model_fault_backoff_seconds: float = 2.0
    # No part of a model's stream for this long (None: wait forever) fails the request.
    model_stream_idle_seconds: float | None = 300.0
    # Events larger than this (as stored JSON) are refused with InvalidEvent at submit.
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    # At most this many pending events are appended at one safe point; a closing line says how
    # many more wait, and they come at the next safe point, after the model's next turn.
    max_events_per_batch: int = 50


class SessionObserver(Protocol):
    """Hooks for whoever shows the session as it runs (console, demo, tests)."""

    def on_message(self, session: str, message: Message) -> None: ...

    def on_stream_part(self, session: str, part: StreamPart) -> None: ...

    def on_turn_discarded(self, session: str, reason: str) -> None: ...


class NoObserver:
    """The observer of a session nobody watches."""

    def on_message(self, session: str, message: Message) -> None:
        pass

    def on_stream_part(self, session: str, part: StreamPart) -> None:
        pass

    def on_turn_discarded(self, session: str, reason: str) -> None:
        pass
