"""Mapping an MCP `CallToolResult` onto our :class:`ToolResult`, losing nothing.

Text parts become the result's text. Everything a text-only model cannot read is kept in
`ToolResult.structured` and described in the text, so such a model still knows it is there:

* images: `structured["images"] = [{"mime_type", "data"}]` (base64, as sent), text
  `[image: image/png, 12 KB]`; a vision-capable model layer sends these as image parts;
* audio: `structured["audio"]`, likewise;
* embedded resources: text resources are inlined in the text; binary ones are kept in
  `structured["resources"]` and described;
* resource links: `structured["resource_links"]`, described by name and URI;
* structured content: `structured["structured_content"]`, as the server sent it; when the server
  sent no text, its JSON is the text.

`structured` is None when the result is plain text.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from ..tools.spec import ToolResult

NO_CONTENT = "(the tool returned no content)"


def tool_result_from_mcp(result: CallToolResult) -> ToolResult:
    """Our ToolResult for an MCP tool result: text for the model, the rest in `structured`."""
    parts: list[str] = []
    extra: dict[str, list[dict[str, Any]]] = {}
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            extra.setdefault("images", []).append(
                {"mime_type": block.mime_type, "data": block.data}
            )
            parts.append(f"[image: {block.mime_type}, {describe_size(block.data)}]")
        elif isinstance(block, AudioContent):
            extra.setdefault("audio", []).append({"mime_type": block.mime_type, "data": block.data})
            parts.append(f"[audio: {block.mime_type}, {describe_size(block.data)}]")
        elif isinstance(block, ResourceLink):
            link = block.model_dump(mode="json", exclude_none=True, by_alias=False)
            extra.setdefault("resource_links", []).append(link)
            mime = f", {block.mime_type}" if block.mime_type else ""
            parts.append(f"[resource link: {block.name} <{block.uri}>{mime}]")
        elif isinstance(block, EmbeddedResource):
            parts.append(_embedded_resource(block, extra))
    structured: dict[str, Any] = dict(extra)
    if result.structured_content is not None:
        structured["structured_content"] = result.structured_content
    text = "\n".join(parts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if not text:
        text = "(the tool reported an error without a message)" if result.is_error else NO_CONTENT
    return ToolResult(text, is_error=result.is_error, structured=structured or None)


def _embedded_resource(block: EmbeddedResource, extra: dict[str, list[dict[str, Any]]]) -> str:
    resource = block.resource
    mime = resource.mime_type or "unknown type"
    if isinstance(resource, TextResourceContents):
        return f"[resource {resource.uri} ({mime})]\n{resource.text}"
    assert isinstance(resource, BlobResourceContents)
    extra.setdefault("resources", []).append(
        {"uri": str(resource.uri), "mime_type": resource.mime_type, "data": resource.blob}
    )
    return f"[resource: {resource.uri}, {mime}, {describe_size(resource.blob)}]"


def describe_size(data: str) -> str:
    """The decoded size of base64 `data`, for people: '68 bytes', '12 KB', '3.4 MB'."""
    # From the length alone: decoding a large image only to measure it would be wasteful.
    size = len("".join(data.split()).rstrip("=")) * 3 // 4
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"
