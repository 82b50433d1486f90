"""The runtime on either store: one worker runs unchanged on PostgreSQL (`store_url`), and the
store settings refuse what cannot work with an error that names the fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from servers.postgres import RuntimeStoreUnderTest
from wakeful.errors import StoreError, UserError
from wakeful.events import user_input
from wakeful.messages import AssistantMessage, Message, UserMessage, check_trajectory
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime

pytestmark = pytest.mark.anyio


def answer_once(msgs: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
    last = msgs[-1]
    if isinstance(last, UserMessage):
        return use(call("reply_to_user", text=f"You said: {last.content}"))
    return say("")


async def test_a_runtime_answers_and_keeps_its_state_in_the_store(
    runtime_store: RuntimeStoreUnderTest, tmp_path: Path
) -> None:
    async with Runtime(
        model=FunctionModel(answer_once), workdir=tmp_path, **runtime_store.options
    ) as rt:
        await rt.submit(user_input("hello"))
        await rt.wait_idle()
        sent = [m.text for m in await rt.outbox.messages.list(session="main")]
        assert sent == ["You said: hello"]
    async with runtime_store.open() as store:
        trajectory = await store.load_trajectory("main")
        assert check_trajectory(trajectory) == []
        assert [m.content for m in trajectory if isinstance(m, UserMessage)] == ["hello"]
        assert any(isinstance(m, AssistantMessage) for m in trajectory)
        assert await store.pending_events() == []
        stored = [m.text for m in await store.messages.list(session="main")]
        assert stored == ["You said: hello"]
    # A new runtime on the same store reloads the session where it was.
    async with Runtime(
        model=FunctionModel(answer_once), workdir=tmp_path, **runtime_store.options
    ) as rt:
        session = await rt.session("main")
        assert list(session.trajectory.messages) == trajectory


async def test_a_runtime_on_postgres_has_no_file_to_watch_and_is_never_short_of_space(
    postgres_url: str, tmp_path: Path
) -> None:
    from wakeful.store.postgres import PostgresStore

    async with Runtime(
        model=FunctionModel(answer_once), workdir=tmp_path, store_url=postgres_url
    ) as rt:
        store = rt.store
        assert isinstance(store, PostgresStore)
        assert store.path is None  # no file here: the database is on its server
        assert not store.space_short and store.held_writes == 0
        database = postgres_url.split("/")[3].split("?")[0]
        assert store.where.startswith(f"the PostgreSQL database {database!r} on ")
    assert store.closed


# --- bad settings -------------------------------------------------------------------------------


def test_a_store_path_and_a_store_url_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"both store_path .* and store_url .*give one"):
        Runtime(
            model=FunctionModel(answer_once),
            store_path=tmp_path / "wakeful.db",
            store_url="postgresql://wakeful@db/wakeful",
        )


@pytest.mark.parametrize(
    "url",
    ["postgresq://wakeful@db/wakeful", "postgressql://wakeful@db/wakeful", "mysql://a@b/c"],
)
def test_a_misspelt_scheme_is_refused_naming_the_right_one(url: str) -> None:
    with pytest.raises(UserError, match=r"is not a PostgreSQL URL.*postgresql://USER@HOST"):
        Runtime(model=FunctionModel(answer_once), store_url=url)


@pytest.mark.parametrize(
    "url",
    ["postgresql://wakeful:s3cret@db/wakeful", "postgresql://wakeful@db/wakeful?password=s3cret"],
)
def test_a_password_in_the_url_is_refused_and_never_repeated(url: str) -> None:
    with pytest.raises(UserError, match=r"names a password.*PGPASSWORD.*pgpass") as caught:
        Runtime(model=FunctionModel(answer_once), store_url=url)
    assert "s3cret" not in str(caught.value)


async def test_an_unreachable_server_fails_the_start_with_the_store_error(tmp_path: Path) -> None:
    # A unix socket folder where no server listens: refused at once, nothing to time out on.
    url = f"postgresql://wakeful@/wakeful?host={tmp_path}&connect_timeout=2"
    runtime = Runtime(model=FunctionModel(answer_once), workdir=tmp_path, store_url=url)
    with anyio.fail_after(20), pytest.raises(StoreError, match=r"Could not connect to .*wakeful"):
        async with runtime:
            pass
