"""MCP sampling: a server that asks this client to run a language model for it gets the runtime's
model, within a token budget, and every request is recorded.

Only servers configured `allow_sampling = true` are offered sampling (the capability is declared
to no other), since each answer spends the user's model budget. The request's messages and
system prompt are a third party's text: they are sent to the model with no tools, and an answer
is only text, so a server cannot make the runtime act through it. Only text content is accepted;
images and audio are refused. Each request and its outcome is logged, kept in `records`
(served by `MCPToolset.sampling_records`) and handed to `on_record`, which in a runtime writes
it to the audit log (one row per request: server, tokens, outcome) and tells the operator the
first time a server samples in a run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anyio
import mcp_types

from ..errors import ModelAPIError
from ..messages import AssistantMessage, Message, SystemMessage, UserMessage
from ..models.base import Model, ModelRequest

log = logging.getLogger(__name__)

# The model's stop reasons in MCP's words; others are passed on as they are (the field is open).
_STOP_REASONS = {"stop": "endTurn", "length": "maxTokens", "max_tokens": "maxTokens"}


@dataclass(frozen=True)
class SamplingRecord:
    """One sampling request of a server, and how it ended."""

    server: str
    tool: str | None
    """The tool whose call asked for it, when known (the 2026-07-28 protocol tells)."""
    messages: int
    prompt_chars: int
    max_tokens: int
    """What the server asked for as the answer's longest length."""
    outcome: Literal["answered", "refused", "failed"]
    tokens: int = 0
    """Tokens the model used for it (prompt and answer), counted against the budget."""
    answer_chars: int = 0
    reason: str = ""
    session: str | None = None
    """The session whose call it came during, when known."""
    seconds: float = 0.0
    """How long answering it took."""


OnSamplingRecord = Callable[[SamplingRecord], Awaitable[None]]
"""Told of each sampling request once it has ended (the runtime audits it)."""


class MCPSampler:
    """Answers one server's sampling requests with `model`, one at a time, until the server has
    used `max_tokens_total` tokens in this run."""

    def __init__(
        self,
        server: str,
        model: Model,
        max_tokens_total: int,
        *,
        on_record: OnSamplingRecord | None = None,
    ) -> None:
        self.server = server
        self.on_record = on_record
        self.model = model
        self.max_tokens_total = max_tokens_total
        self.spent = 0
        self.records: list[SamplingRecord] = []
        # One request at a time, so that two cannot both pass the budget check.
        self._lock = anyio.Lock()

    async def answer(
        self,
        params: mcp_types.CreateMessageRequestParams,
        *,
        tool: str | None = None,
        session: str | None = None,
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        """The model's answer to a sampling request, or the error that refuses it; either way
        the request is recorded and handed to `on_record`."""
        ended: list[SamplingRecord] = []
        try:
            return await self._answer(params, tool, session, ended)
        finally:
            if self.on_record is not None:
                for entry in ended:
                    with anyio.CancelScope(shield=True):
                        await self.on_record(entry)

    async def _answer(
        self,
        params: mcp_types.CreateMessageRequestParams,
        tool: str | None,
        session: str | None,
        ended: list[SamplingRecord],
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        began = anyio.current_time()
        texts = [block.text for m in params.messages for block in _text_blocks(m)]
        prompt_chars = sum(map(len, texts)) + len(params.system_prompt or "")
        asked = f"{len(params.messages)} message(s), {prompt_chars} characters"
        log.warning(
            "MCP server %r asks to sample the runtime's model (%s, max %d tokens, tool %s)",
            self.server,
            asked,
            params.max_tokens,
            tool or "unknown",
        )

        def record(
            outcome: Literal["answered", "refused", "failed"],
            *,
            tokens: int = 0,
            answer_chars: int = 0,
            reason: str = "",
        ) -> None:
            entry = SamplingRecord(
                self.server,
                tool,
                len(params.messages),
                prompt_chars,
                params.max_tokens,
                outcome,
                tokens,
                answer_chars,
                reason,
                session,
                anyio.current_time() - began,
            )
            self.records.append(entry)
            ended.append(entry)
            log.warning("MCP server %r sampling request %s: %s", self.server, outcome, entry)

        refusal = self._refusal(params)
        if refusal is not None:
            record("refused", reason=refusal)
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=refusal)
        async with self._lock:
            left = self.max_tokens_total - self.spent
            if left <= 0:
                reason = (
                    f"MCP server {self.server!r} has used its sampling budget of "
                    f"{self.max_tokens_total} tokens for this run (sampling_max_tokens_total); "
                    "the operator can raise it in the server's configuration"
                )
                record("refused", reason=reason)
                return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=reason)
            request = ModelRequest(
                messages=_messages(params), tools=(), max_tokens=min(params.max_tokens, left)
            )
            try:
                turn = await self.model.complete(request)
            except ModelAPIError as exc:
                reason = f"the runtime's model failed to answer: {exc}"
                record("failed", reason=reason)
                return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=reason)
            tokens = turn.usage.input_tokens + turn.usage.output_tokens
            self.spent += tokens
        # Tool calls are not offered, and any the model wrote anyway are dropped: the answer
        # is its text alone.
        text = turn.message.content
        record("answered", tokens=tokens, answer_chars=len(text))
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=text),
            model=self.model.name,
            stop_reason=_STOP_REASONS.get(turn.stop_reason, turn.stop_reason),
        )

    def _refusal(self, params: mcp_types.CreateMessageRequestParams) -> str | None:
        """Why a request cannot be answered whatever the budget, or None."""
        for message in params.messages:
            for block in message.content_as_list:
                if not isinstance(block, mcp_types.TextContent):
                    return (
                        f"MCP server {self.server!r} sent {block.type} content in a sampling "
                        "request; this client samples with text only, so send the request "
                        "as text"
                    )
        if params.tools or params.tool_choice is not None:
            return (
                f"MCP server {self.server!r} offered tools in a sampling request; this client "
                "does not let sampled answers call tools, so send the request without tools"
            )
        return None


def _text_blocks(message: mcp_types.SamplingMessage) -> list[mcp_types.TextContent]:
    return [b for b in message.content_as_list if isinstance(b, mcp_types.TextContent)]


def _messages(params: mcp_types.CreateMessageRequestParams) -> list[Message]:
    messages: list[Message] = []
    if params.system_prompt:
        messages.append(SystemMessage(content=params.system_prompt))
    for message in params.messages:
        text = "".join(block.text for block in _text_blocks(message))
        if message.role == "assistant":
            messages.append(AssistantMessage(content=text))
        else:
            messages.append(UserMessage(content=text))
    return messages
