"""`transcribe_audio`: the speech in an audio file under the root, as timed text, by a local
Whisper model through faster-whisper.

An optional extra: faster-whisper is not a dependency and no model is downloaded. The user installs
the package and points `AudioSettings.whisper_model_path` at a converted (CTranslate2) model
directory; without either, the tool fails with an error that names what to set.
"""

from __future__ import annotations

import importlib
import os
import stat
import threading
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ...errors import ToolError
from ...safety.beneath import Opened
from ...services import settings_of
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .workspace import open_workspace

BODY_LIMIT = 9_000
"""Characters of transcript in one result; the header and notes fit in the rest of 10,000."""
INSTALL_HINT = "pip install faster-whisper"


class AudioSettings(BaseModel):
    """Settings of transcribe_audio (`[perception.audio]` in wakeful.toml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    whisper_model_path: str | None = None
    """A faster-whisper (CTranslate2) model directory, e.g. "/models/whisper-small"; None turns
    transcription off. Nothing is ever downloaded."""

    device: str = "cpu"
    """Where the model runs: "cpu", "cuda" or "auto"."""

    compute_type: str = "int8"
    """The CTranslate2 compute type, e.g. "int8" on CPU or "float16" on a GPU."""

    max_audio_bytes: int = Field(default=500 * 1024 * 1024, ge=1024)
    """The largest audio file that is transcribed."""


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"path": "recordings/standup.mp3"},
        {"path": "voice/memo.ogg", "language": "zh"},
    ),
)
async def transcribe_audio(
    ctx: ToolContext,
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="The audio file (MP3, WAV, OGG, M4A, FLAC…), relative to the root (or "
            "absolute inside it), e.g. 'recordings/standup.mp3'.",
        ),
    ],
    language: Annotated[
        str | None,
        Field(
            min_length=2,
            max_length=8,
            pattern=r"^[a-z]{2,3}$",
            description="The spoken language as an ISO 639-1 code; omitted, it is detected "
            "from the first 30 seconds, e.g. 'en'.",
        ),
    ] = None,
) -> ToolResult:
    """Transcribe the speech in an audio file under the root with a local Whisper model.

    Use it for voice memos, meeting recordings and other speech you need as text. It is an
    optional feature: it needs the faster-whisper package and a model directory set in
    AudioSettings.whisper_model_path ([perception.audio] whisper_model_path in wakeful.toml),
    and says so when either is missing.

    It cannot read outside the root, does not identify speakers, and does not describe music or
    other sounds.

    Result: a header such as "recordings/standup.mp3: 3 min 12 s, language en (0.98)", then one
    line per segment: "[12.4-15.0] text", cut at 9,000 characters with a note.
    structuredContent holds path, language, duration_seconds and segments: [{start, end, text}].

    Cost: roughly a tenth to a half of the audio's duration on a CPU with a small model (a
    minute of speech in 5-30 s), plus a few seconds to load the model; about 1,000 characters
    per minute of speech.
    """
    settings = settings_of(ctx.services, AudioSettings)
    model_path = _model_path(settings)
    whisper = _faster_whisper()

    def transcribe() -> tuple[str, dict[str, Any]]:
        # faster-whisper gets the file opened beneath the root, never its path (which a swapped
        # symlink could redirect after the check).
        with open_workspace(ctx) as root, root.open(path) as found:
            _check_file(found, settings)
            with os.fdopen(found.fd, "rb", closefd=False) as audio:
                return found.shown, _transcribe(whisper, model_path, settings, audio, language)

    shown_path, transcript = await anyio.to_thread.run_sync(transcribe)
    return _result(shown_path, transcript)


def _model_path(settings: AudioSettings) -> str:
    if settings.whisper_model_path is None:
        raise ToolError(
            "transcribe_audio has no Whisper model: AudioSettings.whisper_model_path is not set. "
            "Set whisper_model_path under [perception.audio] in wakeful.toml to a faster-whisper "
            f"(CTranslate2) model directory, and install the package ({INSTALL_HINT})."
        )
    if not Path(settings.whisper_model_path).is_dir():
        raise ToolError(
            f"AudioSettings.whisper_model_path is {settings.whisper_model_path!r}, which is not "
            "a directory. Set [perception.audio] whisper_model_path in wakeful.toml to a "
            "faster-whisper (CTranslate2) model directory."
        )
    return settings.whisper_model_path


def _faster_whisper() -> Any:
    try:
        return importlib.import_module("faster_whisper")
    except ImportError as exc:
        raise ToolError(
            "transcribe_audio needs the faster-whisper package, which is not installed. "
            f"Install it ({INSTALL_HINT}) in wakeful's environment; the model comes from "
            "[perception.audio] whisper_model_path in wakeful.toml."
        ) from exc


def _check_file(found: Opened, settings: AudioSettings) -> None:
    shown_path = found.shown
    info = os.fstat(found.fd)
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown_path!r} is not a regular file; transcribe_audio reads files.")
    if info.st_size == 0:
        raise ToolError(f"{shown_path!r} is empty (0 bytes), so it holds no audio.")
    if info.st_size > settings.max_audio_bytes:
        raise ToolError(
            f"{shown_path!r} has {info.st_size:,} bytes, over the {settings.max_audio_bytes:,} "
            "bytes transcribe_audio takes (AudioSettings.max_audio_bytes). Cut it into parts."
        )


_models: dict[tuple[str, str, str], Any] = {}
_models_lock = threading.Lock()


def _transcribe(
    whisper: Any, model_path: str, settings: AudioSettings, audio: BinaryIO, language: str | None
) -> dict[str, Any]:
    key = (model_path, settings.device, settings.compute_type)
    with _models_lock:  # load each model once; loading takes seconds and much memory
        model = _models.get(key)
        if model is None:
            model = whisper.WhisperModel(
                model_path, device=settings.device, compute_type=settings.compute_type
            )
            _models[key] = model
    try:
        segments, info = model.transcribe(audio, language=language)
        timed = [
            {"start": round(s.start, 2), "end": round(s.end, 2), "text": s.text.strip()}
            for s in segments
        ]
    except (ValueError, RuntimeError, OSError) as exc:
        raise ToolError(
            f"faster-whisper could not transcribe the file ({type(exc).__name__}: {exc}). Check "
            "that it is an audio file, or convert it to WAV or MP3."
        ) from exc
    return {
        "language": info.language,
        "language_probability": round(float(info.language_probability), 2),
        "duration_seconds": round(float(info.duration), 2),
        "segments": timed,
    }


def _result(shown_path: str, transcript: dict[str, Any]) -> ToolResult:
    duration = float(transcript["duration_seconds"])
    minutes, seconds = divmod(round(duration), 60)
    length = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    header = (
        f"{shown_path}: {length}, language {transcript['language']} "
        f"({transcript['language_probability']})"
    )
    lines: list[str] = []
    used = 0
    segments = transcript["segments"]
    for segment in segments:
        line = f"[{segment['start']:.1f}-{segment['end']:.1f}] {segment['text']}"
        if used + len(line) + 1 > BODY_LIMIT:
            break
        lines.append(line)
        used += len(line) + 1
    parts = [header, "\n".join(lines) if lines else "(no speech was recognised)"]
    if len(lines) < len(segments):
        parts.append(
            f"(cut after {len(lines)} of {len(segments)} segments; structuredContent holds them "
            "all)"
        )
    return ToolResult("\n".join(parts), structured={"path": shown_path, **transcript})


AUDIO_TOOLS = (transcribe_audio,)
"""transcribe_audio: speech to text with a local Whisper model (an optional extra)."""
