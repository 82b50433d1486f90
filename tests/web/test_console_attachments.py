"""A stored message's attachments served by the console: only files a stored message lists,
checked again when served (still inside the workspace, not replaced by a symlink, a regular
file), images inline only when they are images, everything else a download. The attacks first.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

import pytest
from web_harness import ORIGIN, TOKEN, web_console

from wakeful.core.records import MessageAttachment, OutboundMessage
from wakeful.models import ScriptedModel, call, say, use
from wakeful.runtime import Runtime
from wakeful.safety import beneath
from wakeful.web.auth import COOKIE

pytestmark = pytest.mark.anyio

SECRET = "PRIVATE KEY of the host, never to be served"


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG: grey pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80\x80\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


async def send_files(rt: Runtime, workspace: Path, *names: str) -> OutboundMessage:
    """A message with these workspace files attached, as reply_to_user stores it."""
    attachments = [
        MessageAttachment(
            path=str((workspace / name).resolve()),
            name=Path(name).name,
            size=(workspace / name).stat().st_size,
            type="application/octet-stream",
        )
        for name in names
    ]
    return await rt.outbox.send("main", "files", attachments=attachments)


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A secret outside the workspace."""
    secret = tmp_path_factory.mktemp("outside") / "id_ed25519"
    secret.write_text(SECRET, encoding="utf-8")
    return secret


@pytest.mark.parametrize("resolution", ["openat2", "walk"])
async def test_a_file_swapped_for_a_symlink_after_sending_is_refused(
    tmp_path: Path, outside: Path, resolution: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both ways the workspace resolves paths: the kernel's openat2, and the walk without it.
    monkeypatch.setattr(beneath, "use_openat2", resolution == "openat2")
    (tmp_path / "report.txt").write_text("the report", encoding="utf-8")
    (tmp_path / "other.txt").write_text("another workspace file", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("notes", encoding="utf-8")
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        message = await send_files(
            console.runtime, tmp_path, "report.txt", "other.txt", "docs/notes.txt"
        )
        served = await console.client.get(f"/api/attachments/{message.id}/0")
        assert served.status_code == 200 and served.text == "the report"

        # After sending: the file becomes a link to a secret outside the workspace …
        (tmp_path / "report.txt").unlink()
        (tmp_path / "report.txt").symlink_to(outside)
        # … a link to another file inside it (still not the file that was sent) …
        (tmp_path / "other.txt").rename(tmp_path / "moved.txt")
        (tmp_path / "other.txt").symlink_to(tmp_path / "moved.txt")
        # … and a directory on the way becomes a link to the secret's directory.
        (tmp_path / "docs").rename(tmp_path / "docs-old")
        os.symlink(outside.parent, tmp_path / "docs")
        (outside.parent / "notes.txt").write_text(SECRET, encoding="utf-8")
        for index in range(3):
            refused = await console.client.get(f"/api/attachments/{message.id}/{index}")
            assert refused.status_code == 403, index
            assert SECRET not in refused.text
            assert "replaced by a link since it was sent" in refused.json()["error"]
            assert f"attachment {index} of message {message.id}" in refused.json()["error"]


async def test_a_message_listing_a_file_outside_the_workspace_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        # A message stored by other code (or an older version) naming a file outside.
        forged = MessageAttachment(str(outside), "id_ed25519", len(SECRET), "text/plain")
        climbing = tmp_path / ".." / outside.parent.name / outside.name  # starts in the workspace
        dotted = MessageAttachment(str(climbing), "x", 1, "text/plain")
        message = await console.runtime.outbox.send("main", "keys", attachments=[forged, dotted])
        for index in (0, 1):
            refused = await console.client.get(f"/api/attachments/{message.id}/{index}")
            assert refused.status_code == 403
            assert SECRET not in refused.text
            assert "no longer inside the workspace" in refused.json()["error"]


async def test_a_deleted_file_or_a_directory_in_its_place_is_not_served(tmp_path: Path) -> None:
    (tmp_path / "gone.txt").write_text("soon gone", encoding="utf-8")
    (tmp_path / "dir.txt").write_text("soon a directory", encoding="utf-8")
    (tmp_path / "fifo.txt").write_text("soon a pipe", encoding="utf-8")
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        message = await send_files(console.runtime, tmp_path, "gone.txt", "dir.txt", "fifo.txt")
        (tmp_path / "gone.txt").unlink()
        (tmp_path / "dir.txt").unlink()
        (tmp_path / "dir.txt").mkdir()
        (tmp_path / "fifo.txt").unlink()
        os.mkfifo(tmp_path / "fifo.txt")
        gone = await console.client.get(f"/api/attachments/{message.id}/0")
        assert gone.status_code == 404
        assert gone.json()["error"].endswith("(gone.txt) no longer exists.")
        for index, name in ((1, "dir.txt"), (2, "fifo.txt")):
            odd = await console.client.get(f"/api/attachments/{message.id}/{index}")
            assert odd.status_code == 403
            assert f"({name}) is no longer a regular file" in odd.json()["error"]


async def test_unknown_messages_and_indexes_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        message = await send_files(console.runtime, tmp_path, "a.txt")
        plain = await console.runtime.outbox.send("main", "no files")
        unknown = await console.client.get("/api/attachments/msg_nope/0")
        assert unknown.status_code == 404
        assert "No message 'msg_nope' is stored" in unknown.json()["error"]
        for index in ("1", "-1", "x", "01x"):
            wrong = await console.client.get(f"/api/attachments/{message.id}/{index}")
            assert wrong.status_code == 404, index
            error = wrong.json()["error"]
            assert f"{message.id} has 1 attachment(s); {index!r} is not one" in error
            assert "give 0 to 0" in error
        none = await console.client.get(f"/api/attachments/{plain.id}/0")
        assert none.status_code == 404 and "it has none" in none.json()["error"]


async def test_attachments_need_the_token_and_the_consoles_origin(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    async with web_console(ScriptedModel([]), tmp_path) as console:
        message = await send_files(console.runtime, tmp_path, "a.txt")
        path = f"/api/attachments/{message.id}/0"
        assert (await console.client.get(path)).status_code == 401
        console.client.cookies.set(COOKIE, TOKEN)
        elsewhere = await console.client.get(path, headers={"origin": "https://evil.example"})
        assert elsewhere.status_code == 403
        cross = await console.client.get(path, headers={"sec-fetch-site": "cross-site"})
        assert cross.status_code == 403
        assert (await console.client.get(path, headers={"origin": ORIGIN})).status_code == 200


async def test_an_attached_report_is_a_download_and_an_image_is_shown(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "résumé 2026.txt").write_text("all green", encoding="utf-8")
    (tmp_path / "chart.png").write_bytes(png())
    model = ScriptedModel(
        [
            use(
                call(
                    "reply_to_user",
                    text="Here they are.",
                    attachments=["reports/résumé 2026.txt", "chart.png"],
                )
            ),
            say(""),
        ]
    )
    async with web_console(model, tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        await console.client.post("/api/send", json={"text": "files?"}, headers=console.csrf)
        await console.runtime.wait_idle()
        [message] = (await console.client.get("/api/messages")).json()["messages"][1:]
        assert [a["name"] for a in message["attachments"]] == ["résumé 2026.txt", "chart.png"]
        assert "path" not in message["attachments"][0]  # the page needs no host paths

        report = await console.client.get(f"/api/attachments/{message['id']}/0")
        assert report.status_code == 200 and report.text == "all green"
        assert report.headers["content-type"] == "application/octet-stream"
        assert report.headers["content-disposition"] == (
            "attachment; filename=\"r_sum_ 2026.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9%202026.txt"
        )
        assert report.headers["x-content-type-options"] == "nosniff"
        assert report.headers["content-length"] == str(len("all green"))
        head = await console.client.head(f"/api/attachments/{message['id']}/0")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == str(len("all green"))

        chart = await console.client.get(f"/api/attachments/{message['id']}/1")
        assert chart.content == png()
        assert chart.headers["content-type"] == "image/png"
        assert chart.headers["content-disposition"].startswith("inline;")
        assert chart.headers["x-content-type-options"] == "nosniff"
        assert "default-src 'self'" in chart.headers["content-security-policy"]


async def test_html_svg_and_a_page_named_png_are_never_shown_inline(tmp_path: Path) -> None:
    page = "<html><script>fetch('/api/state').then(r => r.text()).then(alert)</script></html>"
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    svg = "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"
    (tmp_path / "logo.svg").write_text(svg, encoding="utf-8")
    (tmp_path / "photo.png").write_text(page, encoding="utf-8")  # a page pretending
    (tmp_path / "riff.webp").write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt ")  # not a WebP
    async with web_console(ScriptedModel([]), tmp_path) as console:
        console.client.cookies.set(COOKIE, TOKEN)
        names = ("page.html", "logo.svg", "photo.png", "riff.webp")
        message = await send_files(console.runtime, tmp_path, *names)
        for index, name in enumerate(names):
            served = await console.client.get(f"/api/attachments/{message.id}/{index}")
            assert served.status_code == 200
            assert served.headers["content-type"] == "application/octet-stream", name
            assert served.headers["content-disposition"].startswith("attachment;"), name
            assert served.headers["x-content-type-options"] == "nosniff"


async def test_the_live_entry_names_attachments_without_host_paths(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    async with web_console(ScriptedModel([]), tmp_path) as console:
        page = console.web.feed.subscribe("main")
        chunks = page.chunks()
        assert await anext(chunks) == b": connected\n\n"
        message = await send_files(console.runtime, tmp_path, "a.txt")
        event = (await anext(chunks)).decode()
        await chunks.aclose()
        page.close()
    data = json.loads(event.split("data: ", 1)[1])
    assert data["id"] == message.id
    assert data["attachments"] == [{"name": "a.txt", "size": 1, "type": "application/octet-stream"}]
    assert str(tmp_path) not in event
