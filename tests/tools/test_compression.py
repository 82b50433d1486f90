"""Query-aware compression of long tool results by a small model: applied and announced, or not
applied and cut visibly, never silent; short results and errors are left alone."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from wakeful.agent.session import SessionConfig
from wakeful.config import build_compressor, load_config
from wakeful.errors import ModelConnectionError
from wakeful.events import user_input
from wakeful.messages import Message, ToolMessage, UserMessage
from wakeful.models import FunctionModel, ScriptedModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.tools.shaping import COMPRESSION_PROMPT, ModelCompressor, shape
from wakeful.tools.spec import ToolResult, tool

pytestmark = pytest.mark.anyio

TASK = "which tests failed?"
LOG = "".join(
    f"test_{i} {'FAILED' if i % 500 == 0 else 'passed'}\n" for i in range(3_000)
)  # about 40,000 characters
FAILURES = "test_0 FAILED\ntest_500 FAILED\ntest_1000 FAILED"


@tool
async def read_log() -> str:
    """The test log."""
    return LOG


@tool
async def short_log() -> str:
    """A short test log."""
    return "test_0 FAILED"


@tool
async def failing_log() -> ToolResult:
    """A long error."""
    return ToolResult("E" * 20_000, is_error=True)


def small_model(*turns: Turn | str) -> ScriptedModel:
    return ScriptedModel(list(turns), name="small")


async def tool_result(compressor: ModelCompressor | None, tool_name: str) -> ToolMessage:
    """Run one session turn that calls `tool_name`, and return the recorded result."""
    agent = ScriptedModel([use(call(tool_name)), say("done")])
    config = SessionConfig(compressor=compressor)
    async with Runtime(
        model=agent,
        tools=[read_log, short_log, failing_log],
        with_core_tools=False,
        with_timers=False,
        session_config=config,
    ) as rt:
        await rt.submit(user_input(TASK))
        await rt.wait_idle()
        results = [m for m in rt.sessions["main"].trajectory.messages if isinstance(m, ToolMessage)]
    assert len(results) == 1
    return results[0]


# --- the compressor alone ------------------------------------------------------------------------


async def test_an_applied_compression_names_the_model_the_query_and_the_sizes() -> None:
    model = small_model(FAILURES)
    result = await ModelCompressor(model).compress(LOG, query=TASK, limit=10_000)
    assert result.applied and result.text == FAILURES
    assert result.note == (
        f"Compressed by small for the query: {TASK}; {len(LOG):,} → {len(FAILURES):,} "
        "characters. The full result: call the tool again with offset/limit or a narrower query."
    )
    [request] = model.requests
    system, user = request.messages
    assert system.content == COMPRESSION_PROMPT and "never invent" in COMPRESSION_PROMPT
    assert isinstance(user, UserMessage)
    assert user.content.startswith(f"Query: {TASK}\nAnswer in at most 4,000 characters.")
    assert user.content.endswith(LOG)


@pytest.mark.parametrize(
    ("turn", "reason"),
    [
        (Turn(text="x", error=ModelConnectionError("down", provider="small")), "failed (down)"),
        (Turn(text=FAILURES, delay=10), "did not answer within 0.05s"),
        (Turn(text="  \n"), "gave no answer"),
        (Turn(text="y" * 5_000), "answered with 5,000 characters, over the 4,000 asked for"),
    ],
)
async def test_a_failed_compression_is_not_applied_and_says_why(turn: Turn, reason: str) -> None:
    # Two requests: compress() directly, then through shape().
    compressor = ModelCompressor(small_model(turn, turn), timeout=0.05)
    result = await compressor.compress(LOG, query=TASK, limit=10_000)
    assert not result.applied and result.text == LOG
    assert result.note == f"the model small {reason}"
    shaped = await shape(
        LOG, 10_000, how_to_get_more="offset={offset}", compressor=compressor, query=TASK
    )
    assert not shaped.compressed and shaped.truncated and len(shaped.text) <= 10_000
    assert shaped.text.startswith(
        f"[Compression was not applied: the model small {reason}. The result is cut instead.]\n"
        "test_0 FAILED\n"
    )
    assert f"characters omitted; offset={shaped.omitted_start}]" in shaped.text


# --- in the session ------------------------------------------------------------------------------


async def test_a_long_result_is_recorded_compressed_and_says_so() -> None:
    seen: list[str] = []

    def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
        seen.append(messages[-1].content)
        return FAILURES

    model = FunctionModel(answer, name="small")
    result = await tool_result(ModelCompressor(model), "read_log")
    assert result.status == "ok"
    assert result.content == (
        f"[Compressed by small for the query: {TASK}; {len(LOG):,} → {len(FAILURES):,} "
        "characters. The full result: call the tool again with offset/limit or a narrower "
        f"query.]\n{FAILURES}"
    )
    # The query is the task: the user's latest request.
    assert seen and seen[0].startswith(f"Query: {TASK}\n")


@pytest.mark.parametrize(
    "turn",
    [Turn(error=ModelConnectionError("down", provider="small")), Turn(text="late", delay=10)],
)
async def test_a_failed_compression_gives_a_visible_cut_that_says_so(turn: Turn) -> None:
    result = await tool_result(ModelCompressor(small_model(turn), timeout=0.05), "read_log")
    assert result.status == "ok" and len(result.content) <= 10_000
    assert result.content.startswith("[Compression was not applied: the model small ")
    assert "The result is cut instead.]\ntest_0 FAILED\n" in result.content
    assert "characters omitted; the full result is not kept: call read_log again" in (
        result.content
    )


@pytest.mark.parametrize("tool_name", ["short_log", "failing_log"])
async def test_short_results_and_errors_are_never_compressed(tool_name: str) -> None:
    model = small_model()  # any request to it would fail the test
    result = await tool_result(ModelCompressor(model), tool_name)
    assert model.requests == []
    assert result.content in ("test_0 FAILED", "E" * 20_000)


async def test_without_a_compressor_a_long_result_is_recorded_as_the_tool_gave_it() -> None:
    result = await tool_result(None, "read_log")
    assert result.content == LOG


# --- configuration -------------------------------------------------------------------------------


def test_the_compression_section_builds_a_model_compressor(tmp_path: Path) -> None:
    path = tmp_path / "wakeful.toml"
    path.write_text(
        '[compression]\nprovider = "openai"\nname = "small"\n'
        'base_url = "http://127.0.0.1:9/v1"\nover_chars = 20000\n',
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.compression is not None
    assert config.compression.timeout_seconds == 10.0
    compressor = build_compressor(config.compression)
    assert compressor.model.name == "small" and compressor.timeout == 10.0
    assert type(compressor.model).__name__ == "OpenAIChatModel"
    session = config.session_config()
    assert isinstance(session.compressor, ModelCompressor)
    assert session.compress_over_chars == 20_000
    assert session.system_prompt == config.agent.system_prompt


def test_without_a_compression_section_no_compressor_is_built(tmp_path: Path) -> None:
    config = load_config(tmp_path / "absent.toml")
    assert config.compression is None
    assert config.session_config() == config.agent.session_config()


async def test_the_small_model_sees_at_most_max_input_chars() -> None:
    seen: list[str] = []

    def small(messages: object, tools: object) -> str:
        seen.append(messages[-1].content)  # type: ignore[index]
        return "the answer"

    compressor = ModelCompressor(FunctionModel(small, name="small"), max_input_chars=1_000)
    result = await compressor.compress("x" * 5_000, query="what?", limit=10_000)
    assert result.applied and "the first 1,000 of 5,000 → 10 characters" in result.note
    assert "Text (the first 1,000 of 5,000 characters):" in seen[0]
    assert seen[0].split("characters):\n", 1)[1] == "x" * 1_000
