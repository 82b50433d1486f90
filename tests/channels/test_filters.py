"""Channel filters: what wakes the agent, why an event does not, and patterns refused up front."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from wakeful.channels.filters import MATCH_CHARS, ChannelFilter, backtracking_risk
from wakeful.events import Event, Source


def event(content: str | dict[str, Any], kind: str = "email.received") -> Event:
    return Event(kind=kind, source=Source(type="contact", id="x"), content=content)


def mail(sender: str = "Bob <Bob@Example.com>", subject: str = "", text: str = "") -> Event:
    return event({"from": sender, "subject": subject, "text": text})


def test_an_empty_filter_lets_everything_through() -> None:
    assert ChannelFilter().empty
    assert ChannelFilter().rejects(mail()) is None
    assert ChannelFilter().rejects(event("plain text")) is None


def test_senders_are_matched_by_address_or_domain_case_insensitively() -> None:
    allow = ChannelFilter(senders_allow=["bob@example.com", "@corp.example"])
    assert allow.rejects(mail("BOB@example.COM")) is None
    assert allow.rejects(mail("Ann <ann@corp.example>")) is None
    assert allow.rejects(mail("eve@evil.example")) == (
        "sender eve@evil.example is not in senders_allow"
    )
    # A subdomain is another domain.
    assert allow.rejects(mail("a@x.corp.example")) is not None
    assert allow.rejects(event({"subject": "no sender"})) == (
        "the event has no sender, and the filter names senders"
    )
    deny = ChannelFilter(senders_allow=["@example.com"], senders_deny=["spam@example.com"])
    assert deny.rejects(mail("spam@example.com")) == "sender spam@example.com is in senders_deny"
    assert ChannelFilter(senders_deny=["@ads.example"]).rejects(event("no sender")) is None


def test_subject_body_and_keywords() -> None:
    f = ChannelFilter(subject_regex="(?i)invoice|receipt")
    assert f.rejects(mail(subject="Your INVOICE #4")) is None
    assert f.rejects(mail(subject="Lunch?")) == (
        "the subject does not match subject_regex '(?i)invoice|receipt'"
    )
    body = ChannelFilter(body_regex=r"order \d+")
    assert body.rejects(mail(text="about order 42")) is None
    assert body.rejects(event("order 7 shipped")) is None  # string content is the text
    words = ChannelFilter(keywords=["urgent", "C++"])
    assert words.rejects(mail(subject="URGENT: db down")) is None
    assert words.rejects(mail(text="we use c++ here")) is None
    assert words.rejects(mail(text="not urgently")) == (
        "none of the keywords urgent, C++ is in the subject or text"
    )


def test_github_repositories_event_types_and_labels() -> None:
    f = ChannelFilter(repositories=["Acme/Widgets"], event_types=["pull_request"], labels=["Bug"])
    hit = event(
        {
            "repository": {"full_name": "acme/widgets"},
            "event_type": "pull_request",
            "labels": [{"name": "bug"}, {"name": "ui"}],
        },
        kind="github.pull_request",
    )
    assert f.rejects(hit) is None
    other_repo = event({"repository": "acme/other"}, kind="github.pull_request")
    assert f.rejects(other_repo) == "repository acme/other is not in repositories"
    by_kind = ChannelFilter(event_types=["github.issue"])
    assert by_kind.rejects(event({}, kind="github.issue")) is None
    assert by_kind.rejects(event({"event_type": "push"}, kind="github.push")) == (
        "event type github.push / push is not in event_types"
    )
    labels = ChannelFilter(labels=["bug"])
    assert labels.rejects(event({"labels": ["docs"]})) == "none of its labels (docs) is in labels"
    assert labels.rejects(event({})) == "none of its labels (none) is in labels"


def test_senders_may_be_ids_such_as_a_github_login() -> None:
    octocat = ChannelFilter(senders_allow=["OctoCat"])
    assert octocat.rejects(event({"from": "octocat"})) is None
    assert octocat.rejects(event({"from": "mallory"})) == "sender mallory is not in senders_allow"
    deny = ChannelFilter(senders_deny=["u024be7lh"])
    assert deny.rejects(event({"from": "U024BE7LH"})) == "sender u024be7lh is in senders_deny"


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("senders_allow", ["bob smith"], "is not an email address, a domain nor a sender id"),
        ("senders_allow", ["bob@"], "is not an email address nor a domain"),
        ("senders_deny", ["@localhost"], "is not a domain"),
        ("subject_regex", "(unclosed", "is not a valid regular expression"),
        ("body_regex", "(a+)+$", "a quantifier inside a repeated group"),
        ("body_regex", r"(\w+\s?)*$", "a quantifier inside a repeated group"),
        ("subject_regex", ".*.*.*x", "two unbounded repeats in a row"),
        ("keywords", ["ok", " "], "a keyword is empty"),
        ("repositories", ["widgets"], "write 'owner/name'"),
        ("labels", [""], "a name is empty"),
    ],
)
def test_bad_filters_are_refused_naming_the_field_and_the_fix(
    field: str, value: object, problem: str
) -> None:
    with pytest.raises(ValidationError) as info:
        ChannelFilter.model_validate({field: value})
    message = str(info.value)
    assert field in message and problem in message


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="sender_allow"):
        ChannelFilter.model_validate({"sender_allow": ["a@b.c"]})


@pytest.mark.parametrize(
    "pattern",
    ["a.*b.*c", r"\w+\s*=\s*\w+", "(foo|bar)+baz", r"[a-z]+[0-9]+", r"(?>a+)+", "a++b"],
)
def test_ordinary_patterns_are_accepted(pattern: str) -> None:
    assert backtracking_risk(pattern) is None
    ChannelFilter(body_regex=pattern)


def test_matching_reads_a_bounded_part_of_a_huge_text() -> None:
    f = ChannelFilter(body_regex="needle", keywords=["needle"])
    late = "x" * MATCH_CHARS + " needle"
    assert f.rejects(mail(text=late)) is not None
    # Only the first MATCH_CHARS characters are read, so an accepted pattern on a hostile 1 MB
    # text costs what it costs on 8 KiB.
    assert ChannelFilter(body_regex=r"a.*b.*c").rejects(mail(text="a" * 1_000_000)) is not None
