"""A loopback Telegram Bot API for tests: a starlette app (serve it with
`loopback_http.serving`) answering `/bot<token>/<method>` in the documented wire format
(`{"ok": true, "result": …}`, errors as `{"ok": false, "error_code": …, "description": …}`).

It keeps updates as Telegram does: `getUpdates` returns those with an id at or above `offset`
(waiting up to `timeout` seconds for one), and forgets those below the offset it was asked
from, so an update not confirmed by a later call is sent again. Tests enqueue updates
(`message`, `button_press`, `enqueue`), make the next calls fail (`fail_next`), and read what
the bot sent (`sent`: every message, with its `reply_markup`; `uploads`: the photos and
documents, by name and size), the reactions it set (`reactions`) and what it asked (`calls`).
Uploads are held to the Bot API's limits for bots: a photo of at most 10 MB, a file of 50 MB.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import anyio
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

BOT = {"id": 999, "is_bot": True, "first_name": "Wakeful", "username": "wakeful_bot"}
MAX_PHOTO_BYTES = 10 * 1024 * 1024
MAX_UPLOAD_BYTES = 50 * 1024 * 1024


@dataclass
class Call:
    """One request the bot made: the method, its parameters (JSON values decoded), and when
    (time.monotonic())."""

    method: str
    params: dict[str, Any]
    at: float


@dataclass
class Failure:
    status: int
    description: str
    retry_after: int | None = None


@dataclass
class FakeBotApi:
    """The fake's state; see the module docs. `token` is the one token it accepts."""

    token: str = "123456:TEST-token-for-the-loopback-bot-api"
    updates: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    uploads: list[dict[str, Any]] = field(default_factory=list)
    reactions: list[dict[str, Any]] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    next_update_id: int = 1000
    _failures: dict[str, list[Failure | None]] = field(default_factory=dict)
    _arrived: anyio.Event = field(default_factory=anyio.Event)
    _message_ids: int = 1

    # What tests do.

    def enqueue(self, update: dict[str, Any]) -> int:
        """Add an update (without `update_id`: one is given) and return its id."""
        update_id = self.next_update_id
        self.next_update_id += 1
        self.updates.append({"update_id": update_id, **update})
        self._arrived.set()
        self._arrived = anyio.Event()
        return update_id

    def message(
        self,
        text: str,
        *,
        user_id: int,
        username: str = "",
        first_name: str = "Someone",
        chat_id: int | None = None,
        chat_type: str = "private",
        chat_title: str = "",
        reply_to: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Enqueue a message from user `user_id` (in their private chat unless `chat_id`)."""
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            sender["username"] = username
        chat: dict[str, Any] = {"id": chat_id if chat_id is not None else user_id}
        chat["type"] = chat_type
        if chat_title:
            chat["title"] = chat_title
        else:
            chat["first_name"] = first_name
        message: dict[str, Any] = {
            "message_id": self._next_message_id(),
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
        }
        if text:
            message["text"] = text
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        message.update(extra or {})
        return self.enqueue({"message": message})

    def button_press(
        self,
        data: str,
        *,
        user_id: int,
        chat_id: int | None = None,
        on: dict[str, Any] | None = None,
    ) -> int:
        """Enqueue a press on an inline keyboard button under a message the bot sent: `on` (one
        of `sent`), or a new one."""
        chat = {"id": chat_id if chat_id is not None else user_id, "type": "private"}
        message = on or {
            "message_id": self._next_message_id(),
            "date": int(time.time()),
            "chat": chat,
            "from": BOT,
            "text": "Send the report now?",
        }
        return self.enqueue(
            {
                "callback_query": {
                    "id": f"cq{self.next_update_id}",
                    "from": {"id": user_id, "is_bot": False, "first_name": "Presser"},
                    "chat_instance": "ci1",
                    "data": data,
                    "message": message,
                }
            }
        )

    def fail_next(
        self,
        method: str,
        status: int,
        *,
        times: int = 1,
        retry_after: int | None = None,
        after: int = 0,
    ) -> None:
        """Make the next `times` calls of `method` fail with HTTP `status` (429 with
        `retry_after` as Telegram's flood control does), once `after` more have succeeded."""
        description = {
            400: "Bad Request: chat not found",
            401: "Unauthorized",
            403: "Forbidden: bot was blocked by the user",
            404: "Not Found",
            409: "Conflict: terminated by other getUpdates request; make sure that only one bot "
            "instance is running",
            429: f"Too Many Requests: retry after {retry_after}",
            413: "Request Entity Too Large",
            500: "Internal Server Error",
        }.get(status, "Error")
        self._failures.setdefault(method, []).extend(
            [None] * after + [Failure(status, description, retry_after)] * times
        )

    def calls_of(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    # The Bot API.

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/bot{token}/{method}", self._endpoint, methods=["POST"])])

    async def _endpoint(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        params = await _params(request)
        self.calls.append(Call(method, params, time.monotonic()))
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        failures = self._failures.get(method)
        failure = failures.pop(0) if failures else None
        if failure is not None:
            return _error(failure.status, failure.description, failure.retry_after)
        if method == "getMe":
            return _ok(BOT)
        if method == "getUpdates":
            return _ok(await self._get_updates(params))
        if method == "sendMessage":
            return _ok(self._send_message(params))
        if method in ("sendPhoto", "sendDocument"):
            return self._send_file(method, params)
        if method == "setMessageReaction":
            return self._set_reaction(params)
        if method == "answerCallbackQuery":
            self.answered.append(str(params["callback_query_id"]))
            return _ok(True)
        return _error(404, "Not Found: method not found")

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = params.get("offset")
        if offset is not None:
            # Telegram forgets every update below the offset asked from: they are confirmed.
            self.updates = [u for u in self.updates if u["update_id"] >= int(offset)]
        limit = int(params.get("limit") or 100)
        with anyio.move_on_after(float(params.get("timeout") or 0)):
            while not self.updates:
                await self._arrived.wait()
        return self.updates[:limit]

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._new_message(params)
        message["text"] = params["text"]
        if "reply_markup" in params:
            message["reply_markup"] = params["reply_markup"]
        self.sent.append(message)
        return message

    def _send_file(self, method: str, params: dict[str, Any]) -> JSONResponse:
        key = "photo" if method == "sendPhoto" else "document"
        upload = params.get(key)
        if not isinstance(upload, Upload):
            return _error(400, f"Bad Request: there is no {key} in the request")
        if upload.size > (MAX_PHOTO_BYTES if key == "photo" else MAX_UPLOAD_BYTES):
            return _error(413, "Request Entity Too Large")
        message = self._new_message(params)
        file = {
            "file_id": f"file{message['message_id']}",
            "file_unique_id": f"u{message['message_id']}",
            "file_size": upload.size,
        }
        if key == "photo":
            message["photo"] = [{**file, "width": 1, "height": 1}]
        else:
            message["document"] = {**file, "file_name": upload.name}
        self.sent.append(message)
        self.uploads.append(
            {
                "method": method,
                "chat_id": message["chat"]["id"],
                "message_id": message["message_id"],
                "name": upload.name,
                "size": upload.size,
            }
        )
        return _ok(message)

    def _set_reaction(self, params: dict[str, Any]) -> JSONResponse:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        if not any(m["chat"]["id"] == chat_id and m["message_id"] == message_id for m in self.sent):
            return _error(400, "Bad Request: message to react not found")
        emoji = [r["emoji"] for r in params.get("reaction", []) if r.get("type") == "emoji"]
        self.reactions.append({"chat_id": chat_id, "message_id": message_id, "emoji": emoji})
        return _ok(True)

    def _new_message(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "message_id": self._next_message_id(),
            "date": int(time.time()),
            "chat": {"id": int(params["chat_id"]), "type": "private"},
            "from": BOT,
        }

    def _next_message_id(self) -> int:
        self._message_ids += 1
        return self._message_ids


_TEXT_PARAMS = frozenset({"text", "callback_query_id", "text_path", "caption"})


@dataclass(frozen=True)
class Upload:
    """A file in a multipart request: its name and size (the bytes are not kept)."""

    name: str
    size: int


async def _params(request: Request) -> dict[str, Any]:
    """The call's parameters: JSON, or form fields (urlencoded, or multipart with files)
    whose values are JSON (as PTB sends them)."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        fields: list[tuple[str, str]] = []
        files: dict[str, Any] = {}
        async with request.form() as form:
            for key, value in form.multi_items():
                if isinstance(value, UploadFile):
                    data = await value.read()
                    files[key] = Upload(value.filename or "", len(data))
                else:
                    fields.append((key, value))
        return _decoded(fields) | files
    body = await request.body()
    if content_type.startswith("application/json"):
        return dict(json.loads(body or b"{}"))
    return _decoded(parse_qsl(body.decode()))


def _decoded(fields: list[tuple[str, str]]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in fields:
        if key in _TEXT_PARAMS:
            params[key] = value
            continue
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


def _ok(result: Any) -> JSONResponse:
    return JSONResponse({"ok": True, "result": result})


def _error(status: int, description: str, retry_after: int | None = None) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return JSONResponse(body, status_code=status)
