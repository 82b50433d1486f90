"""Experiment 4-5 end to end: the scripted agent, real subprocesses, the real runtime."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from process_probes import live_processes_matching
from wakeful.demo.async_scenarios import run_scenario
from wakeful.messages import AssistantMessage, ToolMessage, UserMessage, check_trajectory

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SPEED = 20.0


def sent_texts(result: object) -> list[str]:
    return [str(m["text"]) for m in result.sent]  # type: ignore[attr-defined]


async def test_background_command_while_answering_the_time(tmp_path: Path) -> None:
    result = await run_scenario("background_command", speed=SPEED, workdir=tmp_path)
    texts = sent_texts(result)
    assert texts[0].startswith("Started the analysis as task_")
    assert texts[1].startswith("It is ") and "still running" in texts[1]
    assert texts[2] == "The analysis is done — analysis finished: 1,204 rows, 3 anomalies."
    msgs = result.messages
    # The time question was answered before the background result was appended.
    time_reply = next(
        i
        for i, m in enumerate(msgs)
        if isinstance(m, AssistantMessage) and any("It is" in c.arguments for c in m.tool_calls)
    )
    result_event = next(
        i
        for i, m in enumerate(msgs)
        if isinstance(m, UserMessage) and m.content.startswith("[TOOL_RESULT task_")
    )
    assert time_reply < result_event
    question = next(m for m in msgs if m.content.startswith("By the way, what time is it?"))
    assert "\n[Status] background tasks running: task_" in question.content
    assert check_trajectory(msgs) == []


async def test_instructions_sent_during_a_task_are_batched(tmp_path: Path) -> None:
    result = await run_scenario("batched_instructions", speed=SPEED, workdir=tmp_path)
    msgs = result.messages
    tool_result = msgs[3]
    assert isinstance(tool_result, ToolMessage) and "total sales" in tool_result.content
    batch = msgs[4]
    assert isinstance(batch, UserMessage) and batch.mark == "events"
    assert batch.content.splitlines()[:2] == [
        "[Unprocessed event 1/2] Remember to reply in Japanese.",
        "[Unprocessed event 2/2] And make it a web page.",
    ]
    assert "2 unprocessed events above: 2 user messages" in batch.content
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<html>" in page and "売上報告" in page
    assert sent_texts(result) == ["レポートをウェブページにしました: report.html"]
    assert check_trajectory(msgs) == []


async def test_stop_cancels_the_stream_and_kills_the_command(tmp_path: Path) -> None:
    result = await run_scenario("stop", speed=SPEED, workdir=tmp_path)
    msgs = result.messages
    # Rule 4: the half-written essay is nowhere; the stop follows the request directly.
    assert [m.content for m in msgs[1:3]] == ["Write a long essay about clocks.", "stop"]
    assert not any("Once upon a time" in m.content for m in msgs)
    cancelled = [m for m in msgs if isinstance(m, ToolMessage) and m.status == "cancelled"]
    assert len(cancelled) == 1 and cancelled[0].name == "run_shell"
    assert "because the user interrupted" in cancelled[0].content
    assert msgs[msgs.index(cancelled[0]) + 1].content == "stop the backup"
    assert live_processes_matching("sleep 60; echo backup done") == []
    tasks = result.runtime.tasks.list(background_only=False)
    backup = next(t for t in tasks if "backup" in t.description)
    assert backup.state == "cancelled"
    assert sent_texts(result) == ["Stopped, as you asked.", "Stopped, as you asked."]
    assert check_trajectory(msgs) == []


async def test_three_scripts_cancel_the_slow_one_and_report(tmp_path: Path) -> None:
    result = await run_scenario("three_scripts", speed=SPEED, workdir=tmp_path)
    msgs = result.messages
    statuses = [
        json.loads(m.content)
        for m in msgs
        if isinstance(m, ToolMessage) and m.name == "task_status"
    ]
    by_script = {s["description"].split('"')[1].split()[0]: s for s in statuses}
    assert by_script["B"]["state"] == "running" and by_script["B"]["percent"] >= 50
    assert by_script["C"]["state"] == "running" and by_script["C"]["percent"] < 50
    cancels = [
        c
        for m in msgs
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.name == "cancel_task"
    ]
    assert [json.loads(c.arguments)["task_id"] for c in cancels] == [by_script["C"]["task_id"]]
    c_task = result.runtime.tasks.get(by_script["C"]["task_id"])
    assert c_task is not None and c_task.state == "cancelled"
    assert sent_texts(result)[-1] == (
        "Combined report: A finished: 300 records processed; B finished: 200 records processed"
    )
    assert check_trajectory(msgs) == []


def test_demo_json_prints_each_trajectory_in_the_openai_shape(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wakeful",
            "demo",
            "async",
            "--store-dir",
            str(tmp_path),
            "--json",
            "--speed",
            "20",
            "--scenario",
            "stop",
            "--scenario",
            "batched_instructions",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    heads = [i for i, line in enumerate(lines) if "scenario" in line]
    assert [lines[i]["scenario"] for i in heads] == ["stop", "batched_instructions"]
    body = lines[1 : heads[1]]
    assert body[0]["role"] == "system"
    calls = [m for m in body if m.get("tool_calls")]
    assert set(calls[0]["tool_calls"][0]) == {"id", "type", "function"}
    assert set(calls[0]["tool_calls"][0]["function"]) == {"name", "arguments"}
    results = [m for m in body if m["role"] == "tool"]
    assert all(set(m) == {"role", "tool_call_id", "content"} for m in results)
    # stdout holds only the trajectories; where the stores are goes to stderr.
    assert f"wakeful events tail --store {tmp_path / 'batched_instructions.db'}" in proc.stderr
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["batched_instructions.db", "stop.db"]


def test_demo_rejects_an_unknown_scenario() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "wakeful", "demo", "async", "--scenario", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "Unknown scenario 'nope'" in proc.stderr and "three_scripts" in proc.stderr
