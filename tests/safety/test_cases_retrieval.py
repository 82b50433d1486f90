"""Which earlier cases the BM25 retrieval offers: the calibration behind the default minimum
similarity (`DEFAULT_MIN_SIMILARITY`, see wakeful.safety.cases), on a small realistic book.

Three bands: the same kind of call for a related purpose (offered), the same tool for another
purpose (not offered), another tool (far below). A change of the tokenizer, the field weights or
the threshold that moves a case across the line fails here, with the scores printed.
"""

from __future__ import annotations

import pytest

from wakeful.safety.cases import DEFAULT_MIN_SIMILARITY, CaseBook, CaseRequest

pytestmark = pytest.mark.anyio

ASK = ("It needs a person's approval.",)

# tool, request, context, decision, reason
BOOK = [
    (
        "send_email",
        '{"to": "bob@acme.com", "subject": "Q3 invoice", "body": "attached invoice for Q3"}',
        "send the Q3 invoice to Bob at Acme",
        "approved",
        "Bob is our accountant",
    ),
    ("run_shell", "`rm -rf /srv/app/cache`", "clear the app cache on the server", "approved", ""),
    (
        "run_shell",
        '`psql prod -c "DELETE FROM customers"`',
        "clean up old customers in production",
        "denied",
        "never delete production data without a backup",
    ),
    (
        "call_webhook",
        '{"url": "https://hooks.slack.com/x", "text": "deploy done"}',
        "tell the team the deploy is done",
        "approved",
        "",
    ),
    (
        "create_calendar_event",
        '{"title": "Dentist", "start": "2026-12-03T09:00"}',
        "book the dentist on Thursday",
        "approved",
        "",
    ),
    (
        "send_email",
        '{"to": "press@news.com", "subject": "Launch", "body": "embargoed announcement"}',
        "send the launch announcement to the press",
        "denied",
        "not before the embargo lifts",
    ),
]

# tool, request, context → the cases offered (by number), and those seen but below the line.
QUERIES = [
    (
        "send_email",
        '{"to": "bob@acme.com", "subject": "Q4 invoice", "body": "invoice Q4"}',
        "send Bob the Q4 invoice",
        [1],
    ),
    (
        "run_shell",
        '`psql prod -c "DELETE FROM orders WHERE year < 2020"`',
        "delete old orders in production",
        [3],
    ),
    (
        "call_webhook",
        '{"url": "https://hooks.slack.com/x", "text": "tests failed"}',
        "tell the team the tests failed",
        [4],
    ),
    (
        "send_email",
        '{"to": "mum@home.net", "subject": "Christmas", "body": "see you at christmas"}',
        "write to mum about christmas",
        [],
    ),
    (
        "github_create_pull_request",
        '{"repo": "acme/site", "title": "fix typo"}',
        "open a PR fixing the typo",
        [],
    ),
    ("run_shell", "`ls -la`", "list the files", []),
]


async def book() -> CaseBook:
    # A minimum just above zero, to see every score; the default line is applied below.
    filled = CaseBook(min_similarity=1e-9, limit=len(BOOK))
    for tool, request, context, decision, reason in BOOK:
        await filled.record(
            CaseRequest("main", "approval", tool, request, ASK, context),
            decision,  # type: ignore[arg-type]
            reason,
        )
    return filled


@pytest.mark.parametrize(("tool", "request_text", "context", "offered"), QUERIES)
async def test_only_cases_above_the_default_line_are_offered(
    tool: str, request_text: str, context: str, offered: list[int]
) -> None:
    filled = await book()
    scored = await filled.similar(CaseRequest("main", "approval", tool, request_text, ASK, context))
    scores = {item.case.number: round(item.score, 3) for item in scored}
    above = [number for number, score in scores.items() if score >= DEFAULT_MIN_SIMILARITY]
    assert above == offered, f"scores: {scores}"
    for number, score in scores.items():
        same_tool = BOOK[number - 1][0] == tool
        if number not in offered:
            # Same tool, other purpose: clearly below the line; another tool: far below.
            assert score < (0.23 if same_tool else 0.06), f"case {number}: {scores}"
    # The book with its default line offers exactly these.
    default = CaseBook(filled.repository)
    found = await default.similar(CaseRequest("main", "approval", tool, request_text, ASK, context))
    assert [item.case.number for item in found] == offered
