"""transcribe_audio's error paths: no model weights can be downloaded in tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.services import Services
from wakeful.toolkits.perception.audio import AUDIO_TOOLS, AudioSettings, transcribe_audio
from wakeful.tools.lint import lint_tool
from wakeful.tools.spec import ToolContext, ToolResult

HAS_FASTER_WHISPER = importlib.util.find_spec("faster_whisper") is not None


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "memo.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    return root


async def call(services: Services, **arguments: Any) -> ToolResult:
    ctx = ToolContext("main", "call_1", "transcribe_audio", services)
    return await transcribe_audio.run(arguments, ctx)


def test_the_description_meets_the_standard() -> None:
    assert (transcribe_audio,) == AUDIO_TOOLS
    assert lint_tool(transcribe_audio) == []


@pytest.mark.anyio
async def test_without_a_model_the_error_names_the_setting(services: Services) -> None:
    with pytest.raises(ToolError) as caught:
        await call(services, path="memo.wav")
    message = str(caught.value)
    assert "AudioSettings.whisper_model_path" in message
    assert "[perception.audio]" in message
    assert "wakeful.toml" in message
    assert "pip install faster-whisper" in message


@pytest.mark.anyio
async def test_a_model_path_that_is_not_a_directory(root: Path) -> None:
    async with tool_services(root) as (services, _events):
        services.settings[AudioSettings] = AudioSettings(whisper_model_path="/no/such/model")
        with pytest.raises(ToolError, match=r"'/no/such/model', which is not a directory"):
            await call(services, path="memo.wav")


@pytest.mark.skipif(HAS_FASTER_WHISPER, reason="faster-whisper is installed here")
@pytest.mark.anyio
async def test_without_faster_whisper_the_error_names_the_package(
    root: Path, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    async with tool_services(root) as (services, _events):
        services.settings[AudioSettings] = AudioSettings(whisper_model_path=str(model))
        with pytest.raises(ToolError, match=r"needs the faster-whisper package.*pip install"):
            await call(services, path="memo.wav")


@pytest.mark.anyio
async def test_bad_arguments_are_refused(services: Services) -> None:
    for arguments in (
        {"path": ""},
        {"path": 7},
        {"path": "memo.wav", "language": "English"},
        {"path": "memo.wav", "language": 1},
    ):
        with pytest.raises(ToolError):
            await call(services, **arguments)


def test_settings_refuse_unknown_options() -> None:
    with pytest.raises(ValueError, match="whisper_model"):
        AudioSettings.model_validate({"whisper_model": "/models/small"})
