"""The collaboration MCP server as a client sees it: a real MCP client (in memory, and over
stdio in a subprocess) in front of a real runtime whose children are played by a FunctionModel.

Sync and async delegation, requests to people answered through the client's elicitation (accept,
decline → the default) or, for a client without it, through the runtime's queue (`/approve`),
timeouts with defaults, and a server without [[agents]] that says which tools are off and why."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp.client.context import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from line_channels import until
from loopback_http import mcp_server_over_http
from mcp import Client, StdioServerParameters
from wakeful.cli.mcp import mcp_app
from wakeful.events import user_input
from wakeful.mcp.bridge import BridgeServer
from wakeful.messages import Message, SystemMessage, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.safety.approvals import ApprovalRequest, InputRequest
from wakeful.subagents.definitions import AgentDefinition
from wakeful.toolkits.collaboration.server import ELICITATION_KEY, collaboration_server

pytestmark = pytest.mark.anyio

RESEARCHER = AgentDefinition(
    name="researcher",
    description="Finds one fact.",
    role="You find facts and report them with their source.",
    output_schema={
        "type": "object",
        "required": ["answer"],
        "properties": {"answer": {"type": "string"}},
    },
)

HUMAN_AND_NOTIFY = {
    "request_human_approval",
    "request_human_input",
    "send_im_notification",
    "send_email_notification",
    "send_slack_message",
}
SUBAGENT_TOOLS = {
    "spawn_subagent",
    "send_message_to_subagent",
    "cancel_subagent",
    "list_subagents",
    "wait_subagent",
}


def child_plays(answers: dict[str, str], release: anyio.Event | None = None) -> FunctionModel:
    """Every child returns the answer to its task (`answers` by task text); the parent is the
    MCP client, so the model is never asked as a parent. With `release`, a child waits for it
    before answering (a child still at work)."""

    async def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        system = messages[0]
        assert isinstance(system, SystemMessage)
        assert "You are a subagent" in system.content, "the model was asked as a parent"
        last = messages[-1]
        if not isinstance(last, UserMessage):
            return say("")
        if release is not None:
            await release.wait()
        task = str(last.content).rsplit("\n", 1)[-1]
        return use(call("return_result", result={"answer": answers.get(task, "unknown")}))

    return FunctionModel(play)


@asynccontextmanager
async def served(
    tmp_path: Path, model: FunctionModel | None = None, *, agents: bool = True
) -> AsyncIterator[tuple[Runtime, BridgeServer]]:
    async with Runtime(
        model=model or child_plays({}),
        agents=[RESEARCHER] if agents else [],
        with_timers=False,
        store_path=tmp_path / "w.db",
    ) as rt:
        assert rt.approvals is not None
        yield rt, collaboration_server(rt.services, rt.approvals, rt.subagents)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def elicitation(answer: types.ElicitResult, asked: list[types.ElicitRequestParams]) -> Any:
    async def callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return answer

    return callback


def no_mcp_sessions(rt: Runtime) -> bool:
    """No runtime session was made for a client: it is a parent, not an agent."""
    return not any(name.startswith("mcp:") for name in rt.sessions)


async def test_it_lists_the_collaboration_tools_without_wait_on_the_human_ones(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as (_, server), Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == SUBAGENT_TOOLS | HUMAN_AND_NOTIFY
    for name in ("request_human_approval", "request_human_input"):
        assert "wait" not in tools[name].input_schema["properties"]
        assert "timeout_seconds" in tools[name].input_schema["properties"]


async def test_a_sync_child_returns_its_result_as_the_call_result(tmp_path: Path) -> None:
    model = child_plays({"Capital of France?": "Paris"})
    async with served(tmp_path, model) as (rt, server), Client(server) as client:
        with anyio.fail_after(20):
            result = await client.call_tool(
                "spawn_subagent", {"agent": "researcher", "task": "Capital of France?"}
            )
        assert not result.is_error, text_of(result)
        returned = text_of(result).split("\n", 1)[0]
        assert re.fullmatch(
            r'Subagent sub_[0-9a-f]{8} \(researcher\) returned: \{"answer": "Paris"\}', returned
        )
        listed = json.loads(text_of(await client.call_tool("list_subagents", {})))
        assert [(c["agent"], c["status"]) for c in listed] == [("researcher", "done")]
        assert no_mcp_sessions(rt)


async def test_an_async_child_is_fetched_with_wait_subagent_and_is_the_connections_own(
    tmp_path: Path,
) -> None:
    release = anyio.Event()
    model = child_plays({"Capital of Peru?": "Lima"}, release)
    async with served(tmp_path, model) as (rt, server):
        async with Client(server) as client, Client(server) as other:
            with anyio.fail_after(20):
                spawned = await client.call_tool(
                    "spawn_subagent",
                    {"agent": "researcher", "task": "Capital of Peru?", "mode": "async"},
                )
                assert not spawned.is_error, text_of(spawned)
                child = json.loads(text_of(spawned))["subagent_id"]
                assert re.fullmatch(r"sub_[0-9a-f]{8}", child)
                waited = await client.call_tool(
                    "wait_subagent", {"subagent_id": child, "timeout_seconds": 0.2}
                )
                assert f"{child} is still running after 0.2 s" in text_of(waited)
                # Another client is another parent: it neither sees nor reaches this child.
                assert json.loads(text_of(await other.call_tool("list_subagents", {}))) == []
                stranger = await other.call_tool("wait_subagent", {"subagent_id": child})
                assert stranger.is_error and "You have no subagent" in text_of(stranger)
                release.set()
                done = await client.call_tool("wait_subagent", {"subagent_id": child})
            assert not done.is_error, text_of(done)
            assert f'{child} (researcher) returned: {{"answer": "Lima"}}' in text_of(done)
        assert no_mcp_sessions(rt)


async def test_an_unknown_agent_is_a_tool_error_naming_the_agents(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, server), Client(server) as client:
        for mode in ("sync", "async"):
            result = await client.call_tool(
                "spawn_subagent", {"agent": "nobody", "task": "x", "mode": mode}
            )
            assert result.is_error
            assert "There is no agent named 'nobody'; the agents are: researcher" in text_of(result)


# "auto" speaks the 2026 protocol (the question rides in an input-required result and the client
# calls again with the answer); "legacy" the handshake era (the server sends elicitation/create
# while the call waits).
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_approval_is_asked_through_the_clients_elicitation(
    tmp_path: Path, mode: Literal["auto", "legacy"]
) -> None:
    asked: list[types.ElicitRequestParams] = []
    accept = types.ElicitResult(action="accept", content={"approve": True, "reason": "checked"})
    callback = elicitation(accept, asked)
    async with served(tmp_path) as (rt, server):
        async with Client(server, elicitation_callback=callback, mode=mode) as client:
            with anyio.fail_after(20):
                result = await client.call_tool(
                    "request_human_approval",
                    {"question": "Send the invoice of 4,200 EUR to ACME?", "timeout_seconds": 60},
                )
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None
        assert result.structured_content["choice"] == "approve"
        assert result.structured_content["status"] == "answered"
        assert result.structured_content["reason"] == "checked"
        assert text_of(result).startswith("The approver answered request [")
        (question,) = asked
        assert isinstance(question, types.ElicitRequestFormParams)
        assert "Send the invoice of 4,200 EUR to ACME?" in question.message
        assert "the default: deny" in question.message
        assert rt.approvals is not None and rt.approvals.pending() == []


async def test_a_declined_elicitation_applies_the_default(tmp_path: Path) -> None:
    asked: list[types.ElicitRequestParams] = []
    decline = types.ElicitResult(action="decline")
    callback = elicitation(decline, asked)
    async with (
        served(tmp_path) as (_, server),
        Client(server, elicitation_callback=callback) as client,
    ):
        with anyio.fail_after(20):
            yes_no = await client.call_tool(
                "request_human_approval", {"question": "Delete the old backups?"}
            )
            chosen = await client.call_tool(
                "request_human_approval",
                {
                    "question": "The release has 2 failing tests. What now?",
                    "options": ["ship anyway", "wait for a fix", "cancel the release"],
                    "default": "wait for a fix",
                },
            )
    assert yes_no.structured_content is not None
    assert yes_no.structured_content["choice"] == "deny"
    assert "the default (deny) applies" in text_of(yes_no)
    assert chosen.structured_content is not None
    assert chosen.structured_content["choice"] == "wait for a fix"
    assert chosen.structured_content["applied_default"] is True
    assert "Applied the default: wait for a fix." in text_of(chosen)
    options_form = asked[1]
    assert isinstance(options_form, types.ElicitRequestFormParams)
    assert options_form.requested_schema["properties"]["choice"]["enum"] == [
        "ship anyway",
        "wait for a fix",
        "cancel the release",
    ]


async def test_input_is_asked_through_elicitation_and_checked_against_the_schema(
    tmp_path: Path,
) -> None:
    asked: list[types.ElicitRequestParams] = []
    accept = types.ElicitResult(action="accept", content={"date": "2026-12-24"})
    schema = {
        "type": "object",
        "properties": {"date": {"type": "string", "format": "date"}},
        "required": ["date"],
    }
    callback = elicitation(accept, asked)
    async with (
        served(tmp_path) as (_, server),
        Client(server, elicitation_callback=callback) as client,
    ):
        with anyio.fail_after(20):
            result = await client.call_tool(
                "request_human_input",
                {"question": "Which date should the board meeting move to?", "schema": schema},
            )
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["values"] == {"date": "2026-12-24"}
    (question,) = asked
    assert isinstance(question, types.ElicitRequestFormParams)
    assert question.requested_schema == schema


async def test_without_elicitation_the_request_waits_in_the_queue_for_approve(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as (rt, server), Client(server) as client:
        approvals = rt.approvals
        assert approvals is not None
        async with anyio.create_task_group() as tg:
            results: list[types.CallToolResult] = []

            async def ask() -> None:
                results.append(
                    await client.call_tool(
                        "request_human_approval",
                        {"question": "Restart the production database?", "timeout_seconds": 60},
                    )
                )

            tg.start_soon(ask)
            with anyio.fail_after(20):
                await until(lambda: bool(approvals.pending()))
                (request,) = approvals.pending()
                assert request.session.startswith("mcp:")
                # The question went out through the runtime's outbox, with the way to answer.
                (message,) = [m for m in rt.outbox.sent if m["session"] == request.session]
                assert "Restart the production database?" in message["text"]
                assert f"/approve {request.id}" in message["text"]
                await rt.submit(
                    user_input(f"/approve {request.id} go ahead", session=request.session)
                )
        (result,) = results
        assert result.structured_content is not None
        assert result.structured_content["choice"] == "approve"
        assert result.structured_content["reason"] == "go ahead"
        assert no_mcp_sessions(rt)


async def test_no_answer_in_time_applies_the_default_and_says_so(tmp_path: Path) -> None:
    async with served(tmp_path) as (rt, server), Client(server) as client:
        with anyio.fail_after(20):
            result = await client.call_tool(
                "request_human_approval",
                {"question": "Send the newsletter now?", "timeout_seconds": 0.3},
            )
        approvals = rt.approvals
        assert approvals is not None
        (closed,) = approvals.closed()
        assert isinstance(closed, ApprovalRequest | InputRequest)
    assert result.structured_content is not None
    assert result.structured_content["status"] == "timed_out"
    assert result.structured_content["applied_default"] is True
    assert re.search(r"in 0\.3\d* s\. Applied the default: deny\.", text_of(result)), text_of(
        result
    )


async def test_bad_requests_are_refused_with_the_fix(tmp_path: Path) -> None:
    async with served(tmp_path) as (_, server), Client(server) as client:
        waits = await client.call_tool("request_human_approval", {"question": "Go?", "wait": True})
        no_default = await client.call_tool(
            "request_human_approval", {"question": "Which?", "options": ["red", "blue"]}
        )
    assert waits.is_error and "leave out `wait`" in text_of(waits)
    assert no_default.is_error and "No default was given" in text_of(no_default)


async def test_without_agents_the_server_starts_and_says_which_tools_are_off(
    tmp_path: Path,
) -> None:
    async with served(tmp_path, agents=False) as (_, server), Client(server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == HUMAN_AND_NOTIFY
        assert client.instructions is not None
        assert "Off on this server: spawn_subagent" in client.instructions
        assert "no agents are defined: add [[agents]]" in client.instructions
        with pytest.raises(MCPError) as refused:
            await client.call_tool("spawn_subagent", {"agent": "researcher", "task": "x"})
    assert "The subagent tools are off: no agents are defined" in str(refused.value)


CONFIG = """\
[model]
provider = "openai"
name = "scripted-never-called"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "WAKEFUL_TEST_NO_KEY"

[store]
path = "{store}"
{agents}
"""

AGENTS = """
[[agents]]
name = "researcher"
description = "Finds one fact."
role = "You find facts."
"""


def serve_command(config: Path) -> tuple[str, list[str]]:
    args = ["-m", "wakeful.cli.mcp", "serve", "collaboration", "--config", str(config)]
    return sys.executable, args


@pytest.mark.slow
@pytest.mark.parametrize("agents", [True, False])
async def test_over_stdio_in_a_subprocess(tmp_path: Path, agents: bool) -> None:
    config = tmp_path / "wakeful.toml"
    store = tmp_path / "w.db"
    config.write_text(CONFIG.format(store=store, agents=AGENTS if agents else ""))
    command, args = serve_command(config)
    errors = tmp_path / "stderr.txt"
    with anyio.fail_after(60), errors.open("w") as stderr:
        params = StdioServerParameters(
            command=command, args=args, cwd=tmp_path, env={"WAKEFUL_TEST_NO_KEY": "x"}
        )
        async with Client(stdio_client(params, errlog=stderr)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool(
                "request_human_approval", {"question": "Go ahead?", "timeout_seconds": 0.3}
            )
    assert names == (SUBAGENT_TOOLS | HUMAN_AND_NOTIFY if agents else HUMAN_AND_NOTIFY)
    assert "Applied the default: deny." in text_of(result)
    said = errors.read_text()
    assert ("The subagent tools are off" in said) is not agents


async def test_a_closed_connection_cancels_the_children_nobody_will_read(tmp_path: Path) -> None:
    never = anyio.Event()
    async with served(tmp_path, child_plays({}, never)) as (rt, server):
        async with Client(server) as client:
            spawned = await client.call_tool(
                "spawn_subagent", {"agent": "researcher", "task": "Slow work", "mode": "async"}
            )
            child = json.loads(text_of(spawned))["subagent_id"]
        subagents = rt.subagents
        assert subagents is not None
        await until(lambda: not subagents.busy())
        record = await subagents.repository.get(child)
        assert record is not None and record.status == "cancelled"
        assert no_mcp_sessions(rt)


def test_bad_command_lines_exit_with_a_clear_message(tmp_path: Path) -> None:
    runner = CliRunner()
    config = tmp_path / "wakeful.toml"
    config.write_text("[store]\npath = 'w.db'\n")
    no_model = runner.invoke(mcp_app, ["serve", "collaboration", "--config", str(config)])
    assert no_model.exit_code == 2
    assert "No model is configured" in no_model.output
    bad_http = runner.invoke(
        mcp_app, ["serve", "collaboration", "--config", str(config), "--http", "nope"]
    )
    assert bad_http.exit_code == 2 and "HOST:PORT" in bad_http.output
    config.write_text(CONFIG.format(store=tmp_path / "w.db", agents=AGENTS + "tools = 3\n"))
    bad_agent = runner.invoke(mcp_app, ["serve", "collaboration", "--config", str(config)])
    assert bad_agent.exit_code == 1
    assert "tools" in bad_agent.output
    config.write_text(CONFIG.format(store=tmp_path, agents=""))
    store_is_a_directory = runner.invoke(
        mcp_app,
        ["serve", "collaboration", "--config", str(config)],
        env={"WAKEFUL_TEST_NO_KEY": "x"},
    )
    assert store_is_a_directory.exit_code == 1
    assert f"{tmp_path} is a directory, not a store file" in store_is_a_directory.output


@pytest.mark.slow
async def test_over_streamable_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_NO_KEY", "x")
    config = tmp_path / "wakeful.toml"
    config.write_text(CONFIG.format(store=tmp_path / "w.db", agents=AGENTS))
    command, args = serve_command(config)
    with mcp_server_over_http([command, *args], cwd=tmp_path) as url, anyio.fail_after(30):
        async with Client(url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            unknown = await client.call_tool("spawn_subagent", {"agent": "nobody", "task": "x"})
    assert names == SUBAGENT_TOOLS | HUMAN_AND_NOTIFY
    assert unknown.is_error and "the agents are: researcher" in text_of(unknown)


async def test_a_forged_or_replayed_request_state_is_refused(tmp_path: Path) -> None:
    asked: list[types.ElicitRequestParams] = []
    accept = types.ElicitResult(action="accept", content={"approve": True})
    callback = elicitation(accept, asked)
    arguments = {"question": "Pay the supplier?", "timeout_seconds": 60}
    async with served(tmp_path) as (_, server), Client(server, elicitation_callback=callback) as c:
        with anyio.fail_after(20):
            first = await c.session.call_tool(
                "request_human_approval", arguments, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            assert first.request_state is not None
            with pytest.raises(MCPError) as forged:
                await c.session.call_tool(
                    "request_human_approval",
                    arguments,
                    input_responses={ELICITATION_KEY: accept},
                    request_state="0123456789abcdef",
                )
            answered = await c.session.call_tool(
                "request_human_approval",
                arguments,
                input_responses={ELICITATION_KEY: accept},
                request_state=first.request_state,
            )
            with pytest.raises(MCPError) as replayed:
                await c.session.call_tool(
                    "request_human_approval",
                    arguments,
                    input_responses={ELICITATION_KEY: accept},
                    request_state=first.request_state,
                )
    assert "was not given by this connection" in str(forged.value)
    assert answered.structured_content is not None
    assert answered.structured_content["choice"] == "approve"
    assert "was not given by this connection for this tool, or was answered already" in str(
        replayed.value
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_answer_that_does_not_fit_the_form_is_not_taken(
    tmp_path: Path, mode: Literal["auto", "legacy"]
) -> None:
    asked: list[types.ElicitRequestParams] = []
    bad = types.ElicitResult(action="accept", content={"date": "next Friday-ish"})
    callback = elicitation(bad, asked)
    schema = {"type": "object", "properties": {"date": {"type": "string", "format": "date"}}}
    arguments = {
        "question": "Which date?",
        "schema": schema,
        "default": {"date": "2026-12-24"},
        "timeout_seconds": 0.3,
    }
    async with (
        served(tmp_path) as (_, server),
        Client(server, elicitation_callback=callback, mode=mode) as client,
    ):
        with anyio.fail_after(20):
            result = await client.call_tool("request_human_input", arguments)
    assert result.structured_content is not None
    assert result.structured_content["status"] == "timed_out"
    assert result.structured_content["values"] == {"date": "2026-12-24"}
    assert len(asked) == 1


async def test_an_answer_from_the_channels_wins_over_a_pending_elicitation(tmp_path: Path) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def never_answers(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with (
        served(tmp_path) as (rt, server),
        Client(server, elicitation_callback=never_answers, mode="legacy") as client,
    ):
        approvals = rt.approvals
        assert approvals is not None
        results: list[types.CallToolResult] = []

        async def ask() -> None:
            question = {"question": "Rotate the API keys?", "timeout_seconds": 60}
            results.append(await client.call_tool("request_human_approval", question))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                await until(lambda: bool(asked))
                (request,) = approvals.pending()
                await rt.submit(
                    user_input(f"/deny {request.id} not today", session=request.session)
                )
    (result,) = results
    assert result.structured_content is not None
    assert result.structured_content["choice"] == "deny"
    assert result.structured_content["reason"] == "not today"


async def test_a_childs_question_reaches_the_client_and_its_answer_the_child(
    tmp_path: Path,
) -> None:
    """The client is the parent: the child's ask_parent ends the client's wait_subagent with the
    question (no runtime session is woken for it), and send_message_to_subagent answers it."""

    async def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        system = messages[0]
        assert isinstance(system, SystemMessage) and "You are a subagent" in system.content
        asked = [m for m in messages if getattr(m, "name", "") == "ask_parent"]
        if not asked:
            return use(call("ask_parent", question="Which year: 2024 or 2025?"))
        if not any(getattr(m, "name", "") == "return_result" for m in messages):
            answer = str(asked[0].content)
            return use(call("return_result", result={"answer": f"revenue of {answer}"}))
        return say("")

    async with served(tmp_path, FunctionModel(play)) as (rt, server), Client(server) as client:
        with anyio.fail_after(20):
            spawned = await client.call_tool(
                "spawn_subagent",
                {"agent": "researcher", "task": "Revenue of ACME?", "mode": "async"},
            )
            child = json.loads(text_of(spawned))["subagent_id"]
            waited = await client.call_tool(
                "wait_subagent", {"subagent_id": child, "timeout_seconds": 10}
            )
            assert text_of(waited).startswith(f'{child} asks: "Which year: 2024 or 2025?"')
            [listed] = json.loads(text_of(await client.call_tool("list_subagents", {})))
            assert listed["question"] == "Which year: 2024 or 2025?"
            answered = await client.call_tool(
                "send_message_to_subagent", {"subagent_id": child, "text": "2025"}
            )
            assert text_of(answered) == f"answered the question of {child}"
            done = await client.call_tool("wait_subagent", {"subagent_id": child})
        assert 'returned: {"answer": "revenue of 2025"}' in text_of(done)
        assert no_mcp_sessions(rt)
