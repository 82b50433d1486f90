"""Experiment 4-4 as an acceptance test: the email demo against a real Dovecot, checked over IMAP
afterwards, with a restart in the middle that must handle nothing twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wakeful.demo.email_scenario import EmailDemoResult, run_email_demo
from wakeful.demo.mail_servers import dovecot_missing
from wakeful.messages import AssistantMessage

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(dovecot_missing() is not None, reason=str(dovecot_missing())),
]


def calls_of(result: EmailDemoResult) -> list[str]:
    return [
        call.name
        for messages in result.transcripts.values()
        for m in messages
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls
    ]


@pytest.mark.anyio
async def test_each_mail_is_handled_once_across_a_restart_and_the_mailbox_shows_it(
    tmp_path: Path,
) -> None:
    result = await run_email_demo(store_path=tmp_path / "email.db", restart_after=2)

    assert result.restarts == 1
    inbox = {mail.subject: mail for mail in result.mailboxes["INBOX"]}
    invitation = inbox["Invitation: Q1 planning @ Thu 14 Jan 2027 14:00-15:00 (UTC)"]
    complaint = inbox["Order #48213 arrived broken - I want a refund"]
    # The invitation: a reply declining and proposing another time, in Drafts, threaded.
    (draft,) = result.mailboxes["Drafts"]
    assert draft.subject == "Re: " + invitation.subject
    assert draft.in_reply_to == invitation.message_id
    assert "\\Draft" in draft.flags
    # The complaint: flagged high priority, and the user told its key facts, urgently.
    assert "\\Flagged" in complaint.flags
    assert "\\Flagged" not in invitation.flags
    # The marketing mail: archived, out of the INBOX.
    assert [m.subject for m in result.mailboxes["Archive"]] == [
        "Black Friday: 70% off everything, today only!"
    ]
    assert "Black Friday: 70% off everything, today only!" not in inbox
    # The social network's notice: kept from the agent by the filter, left where it was.
    assert "You have 3 new followers" in inbox
    assert result.filtered == 1
    assert not any("socialnet" in str(m.content) for ms in result.transcripts.values() for m in ms)

    told = [(m["urgency"], m["text"]) for m in result.told_user]
    assert len(told) == 2, told
    (urgent,) = [text for urgency, text in told if urgency == "high"]
    for fact in ("#48213", "#47102", "329.00 EUR", "Friday 4 December", "payment dispute"):
        assert fact in urgent
    (calendar,) = [text for urgency, text in told if urgency == "normal"]
    assert "dentist" in calendar and "draft" in calendar

    # Nothing twice: four events stored for four mails, and each action done once.
    assert result.events == 4
    calls = calls_of(result)
    for once in ("draft_reply", "flag_mail", "archive_mail", "calendar_events"):
        assert calls.count(once) == 1, calls


def test_the_demo_command_runs_and_says_where_its_store_is(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wakeful", "demo", "email", "--store-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "4 events stored, 1 kept from the agent by the filter" in done.stdout
    assert "1 restart(s), nothing handled twice" in done.stdout
    assert f"wakeful events tail --filtered --store {tmp_path / 'email.db'}" in done.stdout
    assert (tmp_path / "email.db").exists()


@pytest.mark.parametrize(
    ("toml", "problem"),
    [(None, "There is no"), ("[agent]\n", "has no [model] table")],
    ids=["missing", "no-model"],
)
def test_a_config_without_a_model_is_refused_naming_the_fix(
    tmp_path: Path, toml: str | None, problem: str
) -> None:
    config = tmp_path / "wakeful.toml"
    if toml is not None:
        config.write_text(toml)
    done = subprocess.run(
        [sys.executable, "-m", "wakeful", "demo", "email", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"COLUMNS": "200"},
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert problem in done.stderr + done.stdout
