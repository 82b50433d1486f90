"""Subagents in a real runtime: the four collaboration modes, results checked against a schema,
questions to the parent, cancellation down a tree, limits, and a restart with a child at work.

One FunctionModel plays every agent: it reads the system prompt to know whether it is the
parent or a child (and which), and the last message to know what happened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from line_channels import until
from servers.postgres import RuntimeStoreUnderTest
from wakeful.events import user_input
from wakeful.messages import Message, SystemMessage, ToolMessage, UserMessage
from wakeful.models import FunctionModel, Turn, call, say, use
from wakeful.models.base import ToolDefinition
from wakeful.runtime import Runtime
from wakeful.subagents.definitions import AgentDefinition
from wakeful.subagents.limits import SubagentLimits

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
HELPER = AgentDefinition(name="helper", description="Does small jobs.", role="You help.")

Script = Callable[[Sequence[Message], str], Turn]


def who(messages: Sequence[Message]) -> str:
    """ "parent", or the child's agent name, from the system prompt."""
    system = messages[0]
    assert isinstance(system, SystemMessage)
    found = re.search(r"You are a subagent \((\w+), id (sub_\w+)\)", system.content)
    return found.group(1) if found else "parent"


def child_id(messages: Sequence[Message]) -> str:
    system = messages[0]
    assert isinstance(system, SystemMessage)
    found = re.search(r"id (sub_[0-9a-f]{8})", system.content)
    assert found
    return found.group(1)


def last(messages: Sequence[Message]) -> Message:
    return messages[-1]


def model_of(scripts: dict[str, Script]) -> FunctionModel:
    def play(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Turn:
        return scripts[who(messages)](messages, "")

    return FunctionModel(play)


def runtime(model: FunctionModel, tmp_path: Path | None = None, **options: Any) -> Runtime:
    """A runtime with the test agents; with `tmp_path`, on a store file there (or give the
    store in `options`)."""
    if tmp_path is not None:
        options.setdefault("store_path", tmp_path / "w.db")
    return Runtime(
        model=model,
        agents=options.pop("agents", [RESEARCHER, HELPER]),
        with_timers=False,
        **options,
    )


def tool_results(messages: Sequence[Message], name: str) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.name == name]


async def settle(rt: Runtime, seconds: float = 10) -> None:
    with anyio.fail_after(seconds):
        await rt.wait_idle()


async def test_a_sync_child_hands_back_its_result_as_the_call_result() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage):
            return use(call("spawn_subagent", agent="researcher", task="Capital of France?"))
        return say("done")

    def researcher(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage):
            return use(call("return_result", result={"answer": "Paris"}))
        return say("")

    model = model_of({"parent": parent, "researcher": researcher})
    async with runtime(model) as rt:
        await rt.submit(user_input("ask the researcher"))
        await settle(rt)
        main = (await rt.session("main")).trajectory.messages
        [result] = tool_results(main, "spawn_subagent")
        assert result.status == "ok"
        returned, how = result.content.split("\n", 1)
        assert re.fullmatch(
            r'Subagent sub_[0-9a-f]{8} \(researcher\) returned: \{"answer": "Paris"\}', returned
        )
        # Which context strategy was chosen, and why, is in the parent's trajectory.
        assert how.startswith("Context strategy: minimal (asked: adaptive), because a short")
        child = next(s for name, s in rt.sessions.items() if name.startswith("sub_"))
        first = child.trajectory.messages[1]
        assert isinstance(first, UserMessage)
        assert first.content == "[FROM_MAIN_AGENT] task\nCapital of France?"
        prompt = child.trajectory.messages[0].content
        assert "You find facts and report them with their source." in prompt
        assert "[FROM_USER]" in prompt and '"required": ["answer"]' in prompt
        # A child never talks to the user, and has its own tools.
        names = {t.name for t in child.registry}
        assert "reply_to_user" not in names and "return_result" in names


async def test_an_async_child_reports_through_an_event() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage) and "Subagent" not in str(
            last(messages).content
        ):
            return use(call("spawn_subagent", agent="helper", task="Count to 3.", mode="async"))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage):
            return use(call("return_result", result="1, 2, 3"))
        return say("")

    model = model_of({"parent": parent, "helper": helper})
    async with runtime(model) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        main = (await rt.session("main")).trajectory.messages
        [started] = tool_results(main, "spawn_subagent")
        sub = json.loads(started.content)["subagent_id"]
        arrived = [m for m in main if isinstance(m, UserMessage) and "subagent.result" in m.content]
        assert len(arrived) == 1
        tag = f"[FROM_SUBAGENT {sub} (helper)] (subagent.result)"
        assert f'{tag} Subagent {sub} (helper) returned: "1, 2, 3"' in arrived[0].content


async def test_a_streaming_child_sends_its_progress_along() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if len(messages) == 2:
            return use(call("spawn_subagent", agent="helper", task="Three steps.", mode="stream"))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        done = len(tool_results(messages, "send_progress"))
        if done < 2:
            return use(call("send_progress", text=f"step {done + 1} done"))
        if not tool_results(messages, "return_result"):
            return use(call("return_result", result="all three done"))
        return say("")

    model = model_of({"parent": parent, "helper": helper})
    async with runtime(model) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        text = "\n".join(
            m.content
            for m in (await rt.session("main")).trajectory.messages
            if isinstance(m, UserMessage)
        )
        assert "(subagent.progress) step 1 done" in text
        assert "(subagent.progress) step 2 done" in text
        assert 'returned: "all three done"' in text


async def test_a_result_off_schema_is_refused_once_then_fails_the_child() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage):
            return use(call("spawn_subagent", agent="researcher", task="Capital of Peru?"))
        return say("")

    def researcher(messages: Sequence[Message], _: str) -> Turn:
        tries = len(tool_results(messages, "return_result"))
        if tries < 2:
            return use(call("return_result", result={"city": "Lima"}))
        return say("")

    model = model_of({"parent": parent, "researcher": researcher})
    async with runtime(model) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        child = next(s for name, s in rt.sessions.items() if name.startswith("sub_"))
        first, _ = tool_results(child.trajectory.messages, "return_result")
        assert first.status == "error"
        assert "'answer' is a required property" in first.content
        assert "call return_result again (once more only)" in first.content
        [result] = tool_results((await rt.session("main")).trajectory.messages, "spawn_subagent")
        assert result.status == "error"
        assert "failed: its result did not match its schema twice" in result.content


async def test_a_child_that_just_answers_in_text_returns_that_text() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage):
            return use(call("spawn_subagent", agent="helper", task="Say hi."))
        return say("")

    model = model_of({"parent": parent, "helper": lambda m, _: say("hi there")})
    async with runtime(model) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        [result] = tool_results((await rt.session("main")).trajectory.messages, "spawn_subagent")
        assert result.content.splitlines()[0].endswith('returned: "hi there"')


async def test_an_unknown_agent_is_a_clear_tool_error() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage):
            return use(call("spawn_subagent", agent="translator", task="Translate this."))
        return say("")

    async with runtime(model_of({"parent": parent})) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        [result] = tool_results((await rt.session("main")).trajectory.messages, "spawn_subagent")
        assert result.status == "error"
        assert (
            "There is no agent named 'translator'; the agents are: helper, researcher."
            in result.content
        )


async def test_a_child_asks_its_parent_and_gets_the_answer() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        text = str(last(messages).content)
        if "(subagent.question)" in text:
            sub = re.search(r"FROM_SUBAGENT (sub_\w+)", text)
            assert sub
            return use(
                call(
                    "send_message_to_subagent", subagent_id=sub.group(1), text="Yes, include them."
                )
            )
        if isinstance(last(messages), UserMessage) and len(messages) == 2:
            return use(call("spawn_subagent", agent="helper", task="List orders.", mode="async"))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        asked = tool_results(messages, "ask_parent")
        if not asked:
            return use(call("ask_parent", question="Include cancelled orders?"))
        if not tool_results(messages, "return_result"):
            return use(call("return_result", result=f"listed; the parent said: {asked[0].content}"))
        return say("")

    model = model_of({"parent": parent, "helper": helper})
    async with runtime(model) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        main = (await rt.session("main")).trajectory.messages
        [answered] = tool_results(main, "send_message_to_subagent")
        assert answered.content.startswith("answered the question of sub_")
        text = "\n".join(m.content for m in main if isinstance(m, UserMessage))
        assert 'returned: "listed; the parent said: Yes, include them."' in text


async def test_cancelling_a_child_cancels_its_own_children(tmp_path: Path) -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        text = str(last(messages).content)
        if text == "go":
            return use(
                call("spawn_subagent", agent="helper", task="Delegate further.", mode="async")
            )
        if text == "cancel it":
            listed = rt_ref[0].subagents
            assert listed is not None
            sub = next(r for r in listed._records.values() if r.depth == 1)
            return use(call("cancel_subagent", subagent_id=sub.id, reason="plan changed"))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        if "(agent.interrupt)" in str(last(messages).content):
            return say("")
        if len(messages) == 2 and "Delegate further" in str(messages[1].content):
            return use(call("spawn_subagent", agent="helper", task="Wait for me.", mode="async"))
        if len(messages) == 2:  # the grandchild: asks and waits, forever
            return use(call("ask_parent", question="Anything else?"))
        return say("")

    rt_ref: list[Runtime] = []
    model = model_of({"parent": parent, "helper": helper})
    async with runtime(
        model, tmp_path, subagent_limits=SubagentLimits(answer_timeout_seconds=600)
    ) as rt:
        rt_ref.append(rt)
        await rt.submit(user_input("go"))
        subagents = rt.subagents
        assert subagents is not None
        await until(
            lambda: (
                len(subagents._records) == 2
                and all(r.id in rt.sessions for r in subagents._records.values())
            )
        )
        await anyio.sleep(0.2)
        await rt.submit(user_input("cancel it"))
        await settle(rt, 15)
        [result] = tool_results((await rt.session("main")).trajectory.messages, "cancel_subagent")
        assert re.fullmatch(r"cancelled sub_[0-9a-f]{8}, with 1 of its children", result.content)
        records = await rt.store.subagents.unsettled() if rt.store else []
        assert records == []
        assert rt.store is not None
        [child] = await rt.store.subagents.children("main")
        [grandchild] = await rt.store.subagents.children(child.id)
        assert (child.status, grandchild.status) == ("cancelled", "cancelled")
        assert grandchild.root == child.id  # one delegation, one tree
        texts = [
            m.content
            for m in rt.sessions[grandchild.id].trajectory.messages
            if isinstance(m, UserMessage)
        ]
        assert any("Cancelled by your parent: its parent sub_" in t for t in texts)


@pytest.mark.parametrize("with_store", [False, True])
async def test_cancelling_a_lead_ends_every_child_of_its_tree_cancelled(
    tmp_path: Path, with_store: bool
) -> None:
    # While a cancel works down the tree, a child whose own children have all ended looks idle
    # with nothing running: it must not be judged "stopped without returning a result".
    branches, leaves = 4, 6

    def parent(messages: Sequence[Message], _: str) -> Turn:
        text = str(last(messages).content)
        if text == "go":
            return use(call("spawn_subagent", agent="helper", task="Lead.", mode="async"))
        if text.startswith("cancel "):
            return use(call("cancel_subagent", subagent_id=text.split()[1], reason="plan changed"))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        if len(messages) != 2:
            return say("")
        task = str(messages[1].content)
        if "Lead." in task:
            return use(*(call("spawn_subagent", agent="helper", task=f"Branch {i}.",
                              mode="async") for i in range(branches)))  # fmt: skip
        if "Branch " in task:
            return use(*(call("spawn_subagent", agent="helper", task=f"Leaf {i}.",
                              mode="async") for i in range(leaves)))  # fmt: skip
        return use(call("ask_parent", question="Go on?"))  # a leaf: asks and waits

    model = model_of({"parent": parent, "helper": helper})
    limits = SubagentLimits(
        max_depth=3, max_children=leaves, max_tree=100, answer_timeout_seconds=600
    )
    async with runtime(model, tmp_path if with_store else None, subagent_limits=limits) as rt:
        subagents = rt.subagents
        assert subagents is not None
        await rt.submit(user_input("go"))
        tree = 1 + branches + branches * leaves
        await until(
            lambda: (
                len(subagents._records) == tree
                and sum(c.question is not None for c in subagents._children.values())
                == branches * leaves
            ),
            seconds=30,
        )
        ids = list(subagents._records)
        lead = next(r for r in subagents._records.values() if r.depth == 1)
        await rt.submit(user_input(f"cancel {lead.id}"))
        await settle(rt, 30)
        records = [await subagents.repository.get(i) for i in ids]
        ended = {(r.id, r.status, r.error) for r in records if r is not None}
        assert len(ended) == tree
        assert {status for _, status, _ in ended} == {"cancelled"}, sorted(
            (status, error) for _, status, error in ended if status != "cancelled"
        )


async def test_limits_refuse_a_spawn_with_the_limit_and_the_fix() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage) and len(messages) == 2:
            return use(
                call("spawn_subagent", agent="helper", task="one", mode="async"),
                call("spawn_subagent", agent="helper", task="two", mode="async"),
            )
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        return use(call("ask_parent", question="wait")) if len(messages) == 2 else say("")

    limits = SubagentLimits(max_children=1, answer_timeout_seconds=0.5)
    async with runtime(
        model_of({"parent": parent, "helper": helper}), subagent_limits=limits
    ) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        first, second = tool_results(
            (await rt.session("main")).trajectory.messages, "spawn_subagent"
        )
        assert first.status == "ok" and second.status == "error"
        assert (
            "1 of your children are running, the most at once (subagents.max_children = 1)"
            in second.content
        )


async def test_a_child_over_its_wall_time_is_cancelled_and_the_parent_told() -> None:
    slow = HELPER.model_copy(update={"max_seconds": 0.5})

    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage) and len(messages) == 2:
            return use(call("spawn_subagent", agent="helper", task="Think long."))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        return use(call("ask_parent", question="wait")) if len(messages) == 2 else say("")

    limits = SubagentLimits(answer_timeout_seconds=60)
    async with runtime(
        model_of({"parent": parent, "helper": helper}), agents=[slow], subagent_limits=limits
    ) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        [result] = tool_results((await rt.session("main")).trajectory.messages, "spawn_subagent")
        assert result.status == "error"
        assert re.search(
            r"was cancelled: it ran 0\.[5-9] s, over its wall time of 0\.5 s", result.content
        )


async def test_a_child_over_its_tokens_is_cancelled() -> None:
    hungry = HELPER.model_copy(update={"max_tokens": 50})

    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage) and len(messages) == 2:
            return use(call("spawn_subagent", agent="helper", task="Write a lot."))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        if len(tool_results(messages, "send_progress")) < 3:
            return use(call("send_progress", text="more"), text="word " * 40)
        return say("")

    async with runtime(model_of({"parent": parent, "helper": helper}), agents=[hungry]) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        [result] = tool_results((await rt.session("main")).trajectory.messages, "spawn_subagent")
        assert result.status == "error"
        assert re.search(r"it used \d+ tokens, over its limit of 50", result.content)


async def test_a_child_at_work_survives_a_restart_and_its_result_arrives_once(
    runtime_store: RuntimeStoreUnderTest,
) -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        if str(last(messages).content) == "go":
            return use(call("spawn_subagent", agent="helper", task="Long job.", mode="async"))
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        if not tool_results(messages, "ask_parent"):
            return use(call("ask_parent", question="May I start?"))
        if not tool_results(messages, "return_result"):
            return use(call("return_result", result="finished after the restart"))
        return say("")

    model = model_of({"parent": parent, "helper": helper})
    limits = SubagentLimits(answer_timeout_seconds=600)
    store = runtime_store.options
    async with runtime(model, subagent_limits=limits, **store) as rt:
        await rt.submit(user_input("go"))
        await until(
            lambda: any(
                tool_results(s.trajectory.messages, "ask_parent") == []
                and len(s.trajectory.messages) > 2
                for name, s in rt.sessions.items()
                if name.startswith("sub_")
            )
        )
        await anyio.sleep(0.2)
    # The child's open ask_parent call is answered "lost" at recovery; it goes on and returns.
    for _ in range(2):
        async with runtime(model, subagent_limits=limits, **store) as rt:
            await settle(rt)
            main = (await rt.session("main")).trajectory.messages
            arrived = [
                m for m in main if isinstance(m, UserMessage) and "subagent.result" in m.content
            ]
            assert len(arrived) == 1
            assert 'returned: "finished after the restart"' in arrived[0].content


async def test_private_data_of_the_conversation_never_reaches_a_child() -> None:
    """The user's card number is in the parent's conversation; the child reads the recent
    turns (automatic strategy), and the card is redacted from them."""
    seen: list[str] = []

    def parent(messages: Sequence[Message], _: str) -> Turn:
        if isinstance(last(messages), UserMessage):
            return use(
                call(
                    "spawn_subagent",
                    agent="helper",
                    task="Book the hotel we discussed, using the card the user gave.",
                    context_strategy="automatic",
                    context="The user wants a quiet room.",
                )
            )
        return say("")

    def helper(messages: Sequence[Message], _: str) -> Turn:
        seen.append(str(messages[1].content))
        return use(call("return_result", result="booked"))

    model = model_of({"parent": parent, "helper": helper})
    async with runtime(model) as rt:
        await rt.submit(user_input("Book Hotel Lumen, card 4111 1111 1111 1111, for Friday"))
        await settle(rt)
        [result] = tool_results((await rt.session("main")).trajectory.messages, "spawn_subagent")
    assert "4111" not in seen[0]
    assert "[FROM_USER]" in seen[0] and "Hotel Lumen" in seen[0]
    assert "The user wants a quiet room." in seen[0]
    assert "Context strategy: automatic" in result.content
    assert "Redacted: card_number" in result.content


async def test_cancelling_a_child_that_already_ended_changes_nothing() -> None:
    def parent(messages: Sequence[Message], _: str) -> Turn:
        text = str(last(messages).content)
        if text == "go":
            return use(call("spawn_subagent", agent="helper", task="Say done."))
        if text == "cancel it":
            [result] = tool_results(messages, "spawn_subagent")
            sub = re.search(r"sub_[0-9a-f]{8}", result.content)
            assert sub
            return use(call("cancel_subagent", subagent_id=sub.group(0), reason="too late"))
        return say("")

    model = model_of({"parent": parent, "helper": lambda m, _: say("done")})
    async with runtime(model) as rt:
        await rt.submit(user_input("go"))
        await settle(rt)
        await rt.submit(user_input("cancel it"))
        await settle(rt)
        [result] = tool_results((await rt.session("main")).trajectory.messages, "cancel_subagent")
        assert result.status == "ok"
        assert re.fullmatch(
            r"sub_[0-9a-f]{8} had already ended \(done\); nothing to cancel", result.content
        )
