"""The parent's view: turns, who each message speaks for, and the named tool results."""

from __future__ import annotations

from delegation_views import conversation

from wakeful.collab import ManualShare, latest_tool_results
from wakeful.collab.parent_view import message_source, recent_turns, turn_numbers
from wakeful.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage


def test_turns_start_at_user_messages_but_not_at_the_runtimes_notes() -> None:
    messages = [
        *conversation(),
        UserMessage(content="Loaded 2 tools.", mark="tools_loaded"),
        AssistantMessage(content="Done."),
    ]
    assert turn_numbers(messages) == [0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5]
    assert recent_turns(messages, 2) == [8, 9, 11]
    assert recent_turns(messages, 0) == []
    assert recent_turns(messages, 99) == [1, 2, 3, 6, 7, 8, 9, 11]


def test_each_message_speaks_for_one_source() -> None:
    messages = conversation()
    assert [message_source(m) for m in messages] == [
        None,  # the system prompt
        "user",
        "main_agent",
        "user",
        None,  # a turn with only tool calls
        "tool_result",
        "user",
        "main_agent",
        "tool_result",  # an outside event, tagged by the runtime
        "user",
    ]
    assert message_source(UserMessage(content="[x] lower-case brackets are the user's")) == "user"


def test_latest_tool_results_keep_the_last_successful_one_per_tool() -> None:
    call = ToolCall(id="c", name="search", arguments="{}")
    messages: list[Message] = [
        AssistantMessage(tool_calls=[call]),
        ToolMessage(tool_call_id="c", name="search", content="first"),
        AssistantMessage(tool_calls=[call.model_copy(update={"id": "d"})]),
        ToolMessage(tool_call_id="d", name="search", content="second"),
        AssistantMessage(tool_calls=[call.model_copy(update={"id": "e"})]),
        ToolMessage(tool_call_id="e", name="search", content="boom", status="error"),
    ]
    assert latest_tool_results(messages) == {"search": "second"}


def test_a_share_list_describes_itself() -> None:
    assert ManualShare().empty
    share = ManualShare(messages=(1, 2), tool_results=("a",), notes=("n",))
    assert not share.empty
    assert share.describe() == "2 messages, 1 tool result, 1 note"
