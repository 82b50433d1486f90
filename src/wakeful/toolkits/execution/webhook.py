"""`call_webhook`: one HTTP request that changes something (POST, PUT, PATCH or DELETE).

A request that changes the world is made once. With an `idempotency_key` the request carries an
`Idempotency-Key` header (servers that honour it deduplicate) and the runtime's ledger answers a
repeated key with the first result without sending again. Without a key the tool works in two
calls, precheck then confirm: the first shows the exact request and returns a token, the second
sends it. A failed request is reported, never retried.

Secrets never pass through the model: `WebhookSettings.header_env` maps header names to the names
of environment variables, and those headers are added to every request (the result says which,
never their values). Because they go to whatever URL is called, such headers are only allowed
together with `allowed_hosts`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import httpx2
from pydantic import Field

from ...errors import ToolError
from ...safety.confirmations import Confirmations, precheck_result
from ...safety.idempotency import IdempotencyLedger, NotExecuted
from ...services import Services, settings_of
from ...tools.http import HttpErrors, http_client, nothing_sent
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .settings import WebhookSettings

BODY_LIMIT = 10_000
MAX_REQUEST_BODY_CHARS = 1_000_000
# Response headers worth showing: what was made, where, and when to come back.
SHOWN_HEADERS = (
    "content-type",
    "content-length",
    "location",
    "etag",
    "retry-after",
    "idempotency-key",
    "x-request-id",
)
# Headers the transport owns; a model-given value would break or confuse the request.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


@tool(
    annotations=ToolAnnotations(
        read_only=False, destructive=True, idempotent=False, open_world=True
    ),
    examples=(
        {
            "url": "https://hooks.example.com/deploy",
            "json_body": {"service": "api", "version": "1.4.2"},
            "idempotency_key": "deploy-api-1.4.2",
        },
        {
            "url": "https://api.example.com/items/42",
            "method": "DELETE",
            "confirmation_token": "cnf_8d2b0f1a",
        },
        {
            "url": "https://status.example.com/notes",
            "method": "PUT",
            "text_body": "Maintenance until 18:00 UTC",
            "headers": {"X-Team": "ops"},
        },
    ),
)
async def call_webhook(
    ctx: ToolContext,
    url: Annotated[
        str,
        Field(
            min_length=1,
            max_length=8192,
            description="The full http(s) URL, e.g. 'https://hooks.example.com/deploy'.",
        ),
    ],
    method: Annotated[
        Literal["POST", "PUT", "PATCH", "DELETE"],
        Field(description="The HTTP method, e.g. 'POST'."),
    ] = "POST",
    json_body: Annotated[
        Any,
        Field(
            description="A JSON value sent as application/json, e.g. {'service': 'api'}. "
            "Do not combine with text_body."
        ),
    ] = None,
    text_body: Annotated[
        str | None,
        Field(
            max_length=MAX_REQUEST_BODY_CHARS,
            description="A text body sent as text/plain; charset=utf-8, exactly as given, "
            "e.g. 'deploy finished'.",
        ),
    ] = None,
    headers: Annotated[
        dict[
            Annotated[str, Field(min_length=1, max_length=200)],
            Annotated[str, Field(max_length=8192)],
        ]
        | None,
        Field(
            max_length=50,
            description="Extra request headers (not secrets; configured ones are added by the "
            "server), e.g. {'X-Team': 'ops'}.",
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            description="Makes the call safe to repeat: sent as the Idempotency-Key header, and "
            "a repeated key returns the first result without sending, e.g. 'deploy-api-1.4.2'.",
        ),
    ] = None,
    confirmation_token: Annotated[
        str | None,
        Field(
            max_length=200,
            description="Without idempotency_key: the token a precheck call returned, to send "
            "the request it showed, e.g. 'cnf_8d2b0f1a'.",
        ),
    ] = None,
) -> ToolResult:
    """Send one HTTP POST, PUT, PATCH or DELETE request with a JSON or text body to a URL.

    Use it to trigger a webhook or call an API that changes something (start a deploy, post to a
    chat, update or delete a record). To read a page or an API answer with GET, use fetch_url.
    With idempotency_key the request is sent at once, with an Idempotency-Key header, and a
    repeated key returns the first result without sending again. Without a key it takes two
    calls: the first sends nothing and returns the exact request and a confirmation token; call
    again with the same arguments and the token to send it.

    It cannot send GET or HEAD, does not follow redirects (a 3xx is returned as is), does not
    retry a failed request (it may have taken effect), and cannot reach hosts outside the
    configured allowed_hosts. Secret headers configured by the operator are added and named in
    the result, never shown.

    Result: "HTTP 201 Created" with selected response headers (content-type, location, etag, …)
    and the response body, cut visibly after 10,000 characters; a status of 400 or above, or a
    failed connection, is an error result with the status and the start of the body.
    structuredContent holds status, headers, body and body_truncated. A precheck returns the
    request preview and the token instead.

    Cost: as long as the server takes to answer (typically 0.1-2 s, at most the configured
    timeout); the result is at most about 10,000 characters of body.
    """
    settings = settings_of(ctx.services, WebhookSettings)
    request = _prepare(settings, url, method, json_body, text_body, headers or {}, idempotency_key)
    arguments: dict[str, Any] = {
        "url": url,
        "method": method,
        "json_body": json_body,
        "text_body": text_body,
        "headers": dict(headers or {}),
    }
    preview = _preview(request)

    async def send() -> ToolResult:
        result, reached = await _send(request, settings, ctx.services)
        if not reached and idempotency_key is not None:
            # Nothing left this machine, so the key is released for a retry once it is fixed.
            raise NotExecuted(result.content + " The idempotency key is free for a retry.")
        return result

    if idempotency_key is not None:
        if confirmation_token is not None:
            raise ToolError(
                "call_webhook got both idempotency_key and confirmation_token. With a key the "
                "request is sent at once (repeats are answered from the first result); without "
                "one it needs a precheck and its token. Pass only one of them."
            )
        ledger = IdempotencyLedger.of(ctx.services)
        return await ledger.run_once(ctx.tool_name, idempotency_key, arguments, send)

    confirmations = Confirmations.of(ctx.services, ttl_seconds=settings.confirmation_ttl_seconds)
    if confirmation_token is None:
        confirmation = await confirmations.issue(ctx.tool_name, arguments, preview)
        return precheck_result(ctx.tool_name, confirmation, preview)
    await confirmations.redeem(confirmation_token, ctx.tool_name, arguments)
    result, _reached = await _send(request, settings, ctx.services)
    if result.is_error:
        await confirmations.mark_failed(confirmation_token, result.content)
        result.content += (
            " It was not retried. To send it again, run the precheck again (call without "
            "confirmation_token) and confirm with the new token."
        )
    return result


class _Request:
    """A checked request: what the preview shows is what is sent, secret values aside."""

    def __init__(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        secret_headers: dict[str, str],
        content: bytes | None,
        shown_body: str | None,
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.secret_headers = secret_headers
        self.content = content
        self.shown_body = shown_body


def _prepare(
    settings: WebhookSettings,
    url: str,
    method: str,
    json_body: Any,
    text_body: str | None,
    headers: Mapping[str, str],
    idempotency_key: str | None,
) -> _Request:
    _check_url(url, settings)
    if json_body is not None and text_body is not None:
        raise ToolError(
            "call_webhook got both json_body and text_body; a request has one body. Pass "
            "json_body for JSON or text_body for plain text."
        )
    sent: dict[str, str] = {}
    for name, value in headers.items():
        _check_header(name, value)
        sent[name] = value
    secret_names = {n.lower() for n in settings.header_env}
    overlap = sorted(n for n in sent if n.lower() in secret_names)
    if overlap:
        raise ToolError(
            f"The header{'s' if len(overlap) > 1 else ''} {', '.join(overlap)} "
            f"{'are' if len(overlap) > 1 else 'is'} set by the server's configuration "
            "(header_env) and cannot be given in a call. Leave them out."
        )
    content: bytes | None = None
    shown: str | None = None
    if json_body is not None:
        try:
            shown = json.dumps(json_body, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ToolError(
                f"json_body cannot be written as JSON: {exc}. Pass a JSON value."
            ) from exc
        if len(shown) > MAX_REQUEST_BODY_CHARS:
            raise ToolError(
                f"json_body is {len(shown):,} characters as JSON, over the limit of "
                f"{MAX_REQUEST_BODY_CHARS:,}. Send less data per request."
            )
        content = shown.encode()
        sent.setdefault("Content-Type", "application/json")
    elif text_body is not None:
        shown = text_body
        content = text_body.encode()
        sent.setdefault("Content-Type", "text/plain; charset=utf-8")
    if idempotency_key is not None:
        _check_header("Idempotency-Key", idempotency_key)
        sent["Idempotency-Key"] = idempotency_key
    secrets = {name: _secret(name, env) for name, env in settings.header_env.items()}
    return _Request(method, url, sent, secrets, content, shown)


def _check_url(url: str, settings: WebhookSettings) -> None:
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ToolError(
            f"{url!r} is not a full http(s) URL; call_webhook needs one such as "
            "'https://hooks.example.com/deploy'."
        )
    if settings.allowed_hosts is not None:
        allowed = {h.lower() for h in settings.allowed_hosts}
        if parts.hostname.lower() not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            raise ToolError(
                f"The host {parts.hostname!r} is not one call_webhook may reach; the allowed "
                f"hosts are: {listed}. Use one of them, or ask the operator to add this host to "
                "allowed_hosts in the webhook settings."
            )


def _check_header(name: str, value: str) -> None:
    if not name.isascii() or any(c in name for c in " \t\r\n:\0"):
        raise ToolError(
            f"The header name {name!r} is not valid: names are ASCII without spaces, colons or "
            "line breaks. Use a name such as 'X-Team'."
        )
    if any(c in value for c in "\r\n\0"):
        raise ToolError(
            f"The value of header {name!r} contains a line break or NUL, which would split the "
            "request. Give the value on one line."
        )
    if not value.isascii():
        raise ToolError(
            f"The value of header {name!r} has characters outside ASCII ({value!r}), which HTTP "
            "headers cannot carry. Use ASCII only, e.g. percent-encode the text."
        )
    if name.lower() in _RESERVED_HEADERS:
        raise ToolError(
            f"The header {name!r} is set by the HTTP client itself and cannot be given. Leave "
            "it out."
        )


def _secret(header: str, env: str) -> str:
    value = os.environ.get(env)
    if value is None:
        raise ToolError(
            f"The header {header!r} is configured to come from the environment variable "
            f"{env!r}, which is not set. Set it where the server runs, or remove the header "
            "from header_env in the webhook settings."
        )
    return value


def _preview(request: _Request) -> str:
    lines = [f"{request.method} {request.url}"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    lines += [
        f"{name}: (secret from the server's configuration)" for name in request.secret_headers
    ]
    text = "\n".join(lines)
    if request.shown_body is not None:
        size = len(request.content or b"")
        text += f"\n\n{request.shown_body}\n\n({size:,} bytes of body)"
    else:
        text += "\n\n(no body)"
    return text


async def _send(
    request: _Request, settings: WebhookSettings, services: Services
) -> tuple[ToolResult, bool]:
    """The response as a result, and whether the request reached the server at all."""
    try:
        async with http_client(services, timeout_seconds=settings.timeout_seconds) as client:
            response = await client.request(
                request.method,
                request.url,
                content=request.content,
                headers={**request.headers, **request.secret_headers},
            )
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        error = _errors(request, settings).for_exception(exc)
        return ToolResult.error(str(error)), not nothing_sent(exc)
    return _answer(request, response, settings), True


def _errors(request: _Request, settings: WebhookSettings) -> HttpErrors:
    return HttpErrors(
        target=f"{request.method} {request.url}",
        timeout_seconds=settings.timeout_seconds,
        check="Check the URL.",
        retry="Check whether it did before sending it again.",
        changes=True,
        status_advice={
            401: "The server refused the credentials; check the headers configured in "
            "header_env of the webhook settings, or the token in the URL.",
            403: "The server refused the credentials; check the headers configured in "
            "header_env of the webhook settings, or the token in the URL.",
        },
        refused="The server refused the request; fix what the body says (URL, body, headers).",
    )


def _answer(request: _Request, response: httpx2.Response, settings: WebhookSettings) -> ToolResult:
    body = response.text
    truncated = len(body) > BODY_LIMIT
    shown_body = body[:BODY_LIMIT]
    headers = {h: response.headers[h] for h in SHOWN_HEADERS if h in response.headers}
    status = response.status_code
    head = f"HTTP {status} {response.reason_phrase}".rstrip()
    text = head + "".join(f"\n{h}: {v}" for h, v in headers.items())
    if request.secret_headers:
        text += "\n(sent with configured headers: " + ", ".join(request.secret_headers) + ")"
    text += "\n\n" + (shown_body if body else "(empty body)")
    if truncated:
        text += f"\n\n[body cut at {BODY_LIMIT:,} of {len(body):,} characters]"
    structured = {
        "status": status,
        "headers": headers,
        "body": shown_body,
        "body_truncated": truncated,
        "body_chars": len(body),
    }
    if status >= 400:
        excerpt = body[:500] + ("…" if len(body) > 500 else "")
        # The body is shown below, whole up to 500 characters, rather than as a one-line excerpt.
        message = _errors(request, settings).status_message(response, said="")
        return ToolResult(
            f"{message}\n\n{excerpt or '(empty body)'}", is_error=True, structured=structured
        )
    return ToolResult(text, structured=structured)


WEBHOOK_TOOLS: tuple[Tool, ...] = (call_webhook,)
