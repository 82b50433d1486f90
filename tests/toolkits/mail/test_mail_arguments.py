"""What the mail tools build before any server is involved: mailbox names in modified UTF-7,
quoted strings, SEARCH criteria, text from MIME, safe file names, the settings, the standard."""

from __future__ import annotations

from datetime import date

import pytest
from mail_fixtures import message
from pydantic import ValidationError

from wakeful.errors import ToolError
from wakeful.toolkits.mail.mailbox_names import (
    decode_mailbox,
    encode_mailbox,
    quoted,
    quoted_mailbox,
)
from wakeful.toolkits.mail.message_text import (
    html_to_text,
    message_text,
    parse_message,
    safe_file_name,
    snippet,
)
from wakeful.toolkits.mail.search_query import search_criteria
from wakeful.toolkits.mail.settings import MailSettings
from wakeful.toolkits.mail.tools import MAIL_TOOLS
from wakeful.tools.lint import lint_tool


def test_every_mail_tool_meets_the_description_standard() -> None:
    assert [t.name for t in MAIL_TOOLS] == [
        "search_mail",
        "read_mail",
        "draft_reply",
        "move_mail",
        "archive_mail",
        "flag_mail",
    ]
    for each in MAIL_TOOLS:
        assert lint_tool(each) == [], each.name
        assert each.spec.annotations.open_world
        assert not each.spec.annotations.destructive  # moving is not destructive; no deleting
    read_only = {t.name for t in MAIL_TOOLS if t.spec.annotations.read_only}
    assert read_only == {"search_mail", "read_mail"}


@pytest.mark.parametrize(
    ("name", "encoded"),
    [
        ("INBOX", "INBOX"),
        ("Tom & Jerry", "Tom &- Jerry"),
        ("~peter/mail/台北/日本語", "~peter/mail/&U,BTFw-/&ZeVnLIqe-"),  # RFC 3501 §5.1.3
        ("Réunions", "R&AOk-unions"),
        ("Entwürfe", "Entw&APw-rfe"),
        ("📬 Post", "&2D3c7A- Post"),
    ],
)
def test_mailbox_names_round_trip_through_modified_utf7(name: str, encoded: str) -> None:
    assert encode_mailbox(name) == encoded
    assert decode_mailbox(encoded) == name


def test_a_malformed_utf7_name_is_kept_as_sent() -> None:
    assert decode_mailbox("Bad &AA- name") == "Bad &AA- name"  # one byte: no UTF-16


def test_quoting_escapes_and_refuses_what_would_end_a_command() -> None:
    assert quoted('say "hi" \\ bye', what="x") == '"say \\"hi\\" \\\\ bye"'
    for bad in ("a\r\nA1 LOGOUT", "a\nb", "nul\0"):
        with pytest.raises(ToolError, match="line break or NUL"):
            quoted(bad, what="search word")
    assert quoted_mailbox('Tom "&" Jerry') == '"Tom \\"&-\\" Jerry"'
    with pytest.raises(ToolError, match="mailbox name is empty"):
        quoted_mailbox("  ")


def test_search_criteria_quote_every_value_and_declare_utf8_only_when_needed() -> None:
    built = search_criteria(
        'invoice "x" OR',
        sender="ana@example.com",
        since=date(2026, 3, 7),
        unread_only=True,
        before_uid=120,
    )
    assert built.arguments == (
        "TEXT", '"invoice"', "TEXT", '"\\"x\\""', "TEXT", '"OR"',
        "FROM", '"ana@example.com"',
        "SINCE", "7-Mar-2026",
        "UNSEEN",
        "UID", "1:119",
    )  # fmt: skip
    assert built.charset is None
    assert search_criteria().arguments == ("ALL",)
    assert search_criteria("café").charset == "UTF-8"
    with pytest.raises(ToolError, match="at most 12"):
        search_criteria(" ".join(["w"] * 13))


def test_plain_text_is_preferred_and_html_alone_is_converted() -> None:
    both = parse_message(message("S", "Plain body.\n", html="<p>HTML body</p>"))
    assert message_text(both).body == "Plain body."
    assert message_text(both).attachments == ()
    assert html_to_text("<h1>Title</h1><ul><li>one</li></ul>") == "# Title\n\n* one"
    deep = "<div>" * 3000 + "deep text" + "</div>" * 3000
    assert "deep text" in html_to_text(deep)


def test_charsets_that_lie_or_do_not_exist_still_give_text() -> None:
    latin1_as_utf8 = parse_message(b"Content-Type: text/plain; charset=utf-8\r\n\r\nCaf\xe9\r\n")
    unknown = parse_message(b"Content-Type: text/plain; charset=x-klingon\r\n\r\nna\xc3\xafve\r\n")
    assert message_text(latin1_as_utf8).body == "Café"
    assert message_text(unknown).body == "naïve"


def test_a_truncated_multipart_still_gives_a_snippet() -> None:
    raw = message("S", "The first words of a long letter.\n" * 50, html="<p>x</p>")
    cut = parse_message(raw[: raw.index(b"first words") + 200])
    assert snippet(cut).startswith("The first words of a long letter. The first words")
    assert len(snippet(cut)) <= 120


@pytest.mark.parametrize(
    ("sent", "saved"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\x\\..\\evil.exe", "evil.exe"),
        ("..", "part-3.bin"),
        (".hidden", "hidden"),
        ("a\x00b\r\nc.txt", "a_b_c.txt"),
        (None, "part-3.bin"),
        ("x" * 300 + ".pdf", "x" * 116 + ".pdf"),
    ],
)
def test_attachment_names_are_made_safe(sent: str | None, saved: str) -> None:
    assert safe_file_name(sent, 3, "application/octet-stream", set()) == saved


def test_repeated_attachment_names_get_numbers() -> None:
    assert safe_file_name("a.txt", 1, "text/plain", {"a.txt"}) == "a-2.txt"
    assert safe_file_name("a.txt", 1, "text/plain", {"a.txt", "a-2.txt"}) == "a-3.txt"


def test_settings_have_working_defaults_and_refuse_nonsense() -> None:
    settings = MailSettings()
    assert (settings.port, settings.security, settings.drafts_mailbox) == (993, "ssl", "Drafts")
    with pytest.raises(ValidationError):
        MailSettings(security="tls")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"must not be written in wakeful\.toml"):
        MailSettings(password="secret")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match=r"in clear text; it is allowed for 127\.0\.0\.1"):
        MailSettings(host="imap.example.com", security="none")
    assert MailSettings(host="localhost", security="none").port == 993
