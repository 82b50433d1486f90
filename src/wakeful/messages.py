"""Trajectory messages: what a session records and what a model reads.

The shapes follow the chat format every provider understands (system, user, assistant with tool
calls, tool results); the provider adapters translate them at the edge. `check_trajectory` states
the invariant the session loop keeps: every tool call is answered by exactly one tool result
before anything else is appended.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

# How deep tool arguments may nest: more than any tool's schema needs, far less than the JSON
# parsers' recursion limits (about 1000), which deeper arguments would exhaust.
MAX_ARGUMENT_DEPTH = 64

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """The deepest nesting of `[` and `{` in JSON text, counted without parsing (so without
    recursion), ignoring brackets inside strings."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_JSON_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:16]


class ToolCall(BaseModel):
    """A tool call as the model emitted it. `arguments` is the raw JSON text, kept verbatim."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_call_id)
    name: str
    arguments: str = "{}"

    @classmethod
    def make(cls, name: str, /, call_id: str | None = None, **arguments: Any) -> ToolCall:
        text = json.dumps(arguments, ensure_ascii=False)
        return cls(id=call_id or new_call_id(), name=name, arguments=text)


class SystemMessage(BaseModel):
    role: Literal["system"] = "system"
    content: str


MarkKind = Literal["event", "events", "parallel", "tools_loaded", "note"]


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Opaque data a provider needs back with this message, by provider name (e.g. Anthropic's
    # signed thinking blocks). Stored with the trajectory, so it survives a restart.
    provider_data: dict[str, Any] = Field(default_factory=dict)


ToolStatus = Literal["ok", "error", "placeholder", "cancelled", "lost"]


class Attachment(BaseModel):
    """Binary content a tool returned beside its text, e.g. a screenshot, base64-encoded.

    The tool message's text already describes it (`[image: image/png, 12 KB]`), so a model that
    cannot see images still knows it is there; adapters of models that can send it as an image.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["image"] = "image"
    mime_type: str
    data: str


def image_attachments(structured: object) -> list[Attachment]:
    """The images of a tool result's `structured["images"]` (`[{"mime_type", "data"}]`).

    Malformed entries (not an `image/*` type, empty or invalid base64) are skipped: the text of
    the result describes every image anyway, and a provider would reject the whole request.
    """
    images = structured.get("images") if isinstance(structured, Mapping) else None
    if not isinstance(images, list):
        return []
    attachments: list[Attachment] = []
    for entry in images:
        if not isinstance(entry, Mapping):
            continue
        mime_type, data = entry.get("mime_type"), entry.get("data")
        if not isinstance(mime_type, str) or not mime_type.startswith("image/"):
            continue
        if not isinstance(data, str) or not data:
            continue
        try:
            base64.b64decode(data, validate=True)
        except binascii.Error:
            continue
        attachments.append(Attachment(mime_type=mime_type, data=data))
    return attachments


class UserMessage(BaseModel):
    """A user-role message. Events reach the model this way, tagged by source in `content`."""

    role: Literal["user"] = "user"
    content: str
    # Which stored events this message carries, and why it was appended; not sent to models.
    event_ids: list[str] = Field(default_factory=list)
    mark: MarkKind | None = None
    # Images its events brought, e.g. a background tool's screenshot; `content` describes them.
    attachments: list[Attachment] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_no_attachments(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # As for ToolMessage: messages without images serialize as before the field existed.
        data: dict[str, Any] = handler(self)
        if not self.attachments:
            data.pop("attachments", None)
        return data


class ToolMessage(BaseModel):
    """The one result paired with a tool call.

    `status` records how the call ended: normally (`ok`/`error`), moved to the background when an
    event interrupted it (`placeholder`, rule 3), stopped (`cancelled`), or lost in a crash.
    """

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    status: ToolStatus = "ok"
    # Images the tool returned; `content` describes them for models that cannot see.
    attachments: list[Attachment] = Field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return self.status in ("error", "cancelled", "lost")

    @model_serializer(mode="wrap")
    def _omit_no_attachments(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Results without attachments serialize as they did before the field existed, so stored
        # trajectories and their JSON stay byte-for-byte the same.
        data: dict[str, Any] = handler(self)
        if not self.attachments:
            data.pop("attachments", None)
        return data


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


def message_from_json(text: str | bytes) -> Message:
    return MESSAGE_ADAPTER.validate_json(text)


def message_to_json(message: Message) -> str:
    return message.model_dump_json()


def to_openai_shape(message: Message) -> dict[str, Any]:
    """The message in the OpenAI Chat Completions shape, as `wakeful demo async --json` prints it.

    Tool calls are `{"id", "type": "function", "function": {"name", "arguments"}}` with the
    arguments as a JSON string, and tool results `{"role": "tool", "tool_call_id", "content"}`,
    so the output can be sent to an OpenAI-compatible API as it is. Attachments, which that
    shape has no field for, ride along under an extra `attachments` key.
    """
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ]
        return out
    if isinstance(message, ToolMessage):
        shape: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content,
        }
        if message.attachments:
            shape["attachments"] = [a.model_dump() for a in message.attachments]
        return shape
    if isinstance(message, UserMessage) and message.attachments:
        return {
            "role": "user",
            "content": message.content,
            "attachments": [a.model_dump() for a in message.attachments],
        }
    return {"role": message.role, "content": message.content}


def check_trajectory(messages: list[Message]) -> list[str]:
    """Problems that would make a provider reject the trajectory; empty when well-formed.

    The rules: a tool message answers a call of the assistant message directly before the run
    of tool messages it belongs to; every call is answered exactly once, before any other message.
    """
    problems: list[str] = []
    open_calls: dict[str, str] = {}
    for i, msg in enumerate(messages):
        if isinstance(msg, ToolMessage):
            if msg.tool_call_id not in open_calls:
                problems.append(
                    f"message {i}: tool result for {msg.tool_call_id!r} answers no open tool call"
                )
            else:
                del open_calls[msg.tool_call_id]
            continue
        if open_calls:
            problems.append(
                f"message {i} ({msg.role}) comes before results of calls {sorted(open_calls)}"
            )
            open_calls.clear()
        if isinstance(msg, SystemMessage) and i != 0:
            problems.append(f"message {i}: system message not at the start")
        if isinstance(msg, AssistantMessage):
            ids = [c.id for c in msg.tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate tool call ids {ids}")
            open_calls = {c.id: c.name for c in msg.tool_calls}
    if open_calls:
        problems.append(f"end: calls {sorted(open_calls)} have no result yet")
    return problems
