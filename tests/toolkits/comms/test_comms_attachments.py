"""reply_to_user's attachments: workspace files by reference, never a path out of the workspace,
never a file over the limit, never their bytes in the agent's context."""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_services import tool_services
from wakeful.errors import ToolError
from wakeful.store.sqlite import Store
from wakeful.toolkits.comms.reply import reply_to_user
from wakeful.toolkits.comms.settings import CommsSettings
from wakeful.tools.spec import ToolContext

pytestmark = pytest.mark.anyio


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "summary.pdf").write_bytes(b"%PDF-1.4 tiny")
    (tmp_path / "secret.txt").write_text("outside the workspace")
    return root


async def refused(workspace: Path, *paths: str) -> str:
    async with tool_services(workspace) as (services, _):
        ctx = ToolContext("main", "call_1", "reply_to_user", services)
        with pytest.raises(ToolError) as caught:
            await reply_to_user.run({"text": "see attached", "attachments": list(paths)}, ctx)
        assert services.outbox.sent == []
        assert await services.outbox.unread() == []
        return str(caught.value)


@pytest.mark.parametrize("path", ["../secret.txt", "reports/../../secret.txt"])
async def test_a_path_climbing_out_of_the_workspace_is_refused(workspace: Path, path: str) -> None:
    assert path in await refused(workspace, path)


async def test_an_absolute_path_outside_the_workspace_is_refused(workspace: Path) -> None:
    outside = str(workspace.parent / "secret.txt")
    assert outside in await refused(workspace, outside)


async def test_a_symlink_leading_out_of_the_workspace_is_refused(workspace: Path) -> None:
    (workspace / "innocent.txt").symlink_to(workspace.parent / "secret.txt")
    assert "innocent.txt" in await refused(workspace, "innocent.txt")


async def test_a_missing_file_and_a_directory_are_refused_by_name(workspace: Path) -> None:
    assert "nope.pdf" in await refused(workspace, "nope.pdf")
    assert "'reports' is not a regular file" in await refused(workspace, "reports")


async def test_a_200_mb_attachment_is_refused_with_the_limit(workspace: Path) -> None:
    big = workspace / "video.mp4"
    with big.open("wb") as file:  # sparse: 200 MB long, nothing written
        file.truncate(200 * 1024 * 1024)
    message = await refused(workspace, "video.mp4")
    assert "'video.mp4' is 209,715,200 bytes" in message
    assert "limit of 52,428,800 bytes (setting max_attachment_bytes)" in message


async def test_the_limit_is_a_setting(workspace: Path) -> None:
    async with tool_services(workspace) as (services, _):
        services.settings[CommsSettings] = CommsSettings(max_attachment_bytes=5)
        ctx = ToolContext("main", "call_1", "reply_to_user", services)
        with pytest.raises(ToolError, match="limit of 5 bytes"):
            await reply_to_user.run(
                {"text": "see attached", "attachments": ["reports/summary.pdf"]}, ctx
            )


async def test_an_attachment_travels_by_reference(workspace: Path) -> None:
    resolved = workspace.resolve()  # noqa: ASYNC240 - set-up, before the loop has work
    async with tool_services(workspace) as (services, _):
        ctx = ToolContext("main", "call_1", "reply_to_user", services)
        result = await reply_to_user.run(
            {"text": "Here is the report.", "attachments": ["reports/summary.pdf"]}, ctx
        )
        assert result.content == "sent"
        [sent] = services.outbox.sent
        assert sent["attachments"] == [
            {
                "path": str(resolved / "reports" / "summary.pdf"),
                "name": "summary.pdf",
                "size": len(b"%PDF-1.4 tiny"),
                "type": "application/pdf",
            }
        ]
        assert "%PDF" not in str(sent)


async def test_a_call_with_attachments_run_again_is_not_sent_twice(
    workspace: Path, tmp_path: Path
) -> None:
    arguments = {"text": "Here is the report.", "attachments": ["reports/summary.pdf"]}
    async with (
        await Store.open(tmp_path / "wakeful.db") as store,
        tool_services(workspace) as (services, _),
    ):
        services.store = store
        services.outbox.messages = store.messages
        ctx = ToolContext("main", "call_1", "reply_to_user", services)
        assert (await reply_to_user.run(arguments, ctx)).content == "sent"
        again = await reply_to_user.run(arguments, ctx)
        assert again.content.startswith("sent (already delivered by this call")
        assert len(services.outbox.sent) == 1
        [stored] = await store.messages.list("main")
        assert [a.name for a in stored.attachments] == ["summary.pdf"]
