"""draft_reply, move_mail, archive_mail and flag_mail against a real Dovecot; the mailboxes are
checked afterwards with doveadm, not with the client under test."""

from __future__ import annotations

import email
import email.policy

import pytest
from mail_fixtures import deliver, doveadm, mail_settings, mailbox_state, message, stop

from servers.dovecot import DovecotServer
from tool_services import call, refused
from wakeful.services import Services
from wakeful.toolkits.mail.filing import archive_mail, draft_reply, flag_mail, move_mail
from wakeful.toolkits.mail.reading import search_mail
from wakeful.toolkits.mail.settings import MailSettings

pytestmark = pytest.mark.anyio


def without_recent(flags: list[str]) -> set[str]:
    return set(flags) - {"\\Recent"}


def saved_draft(server: DovecotServer, uid: int) -> email.message.EmailMessage:
    text = doveadm(server, "fetch", "-u", server.user, "text", "mailbox", "Drafts", "uid", str(uid))
    raw = text.split("text:\n", 1)[1].encode()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, email.message.EmailMessage)
    return parsed


async def test_a_reply_draft_threads_and_addresses_correctly(
    mail: Services, dovecot: DovecotServer
) -> None:
    deliver(
        dovecot,
        message(
            "Budget review",
            "Can we meet?\n",
            message_id="<m2@example.com>",
            References="<m0@example.com> <m1@example.com>",
            In_Reply_To="<m1@example.com>",
        ),
    )

    result = await call(mail, draft_reply, uid=1, body="Yes: Thursday 10:00.\n\nSecretary")

    assert not result.is_error, result.content
    assert result.structured["drafts_mailbox"] == "Drafts"
    assert result.structured["to"] == ["Ana Lima <ana@example.com>"]
    assert result.structured["subject"] == "Re: Budget review"
    draft = mailbox_state(dovecot, "Drafts")
    assert [d["uid"] for d in draft] == [result.structured["draft_uid"]]
    assert {"\\Draft", "\\Seen"} <= without_recent(draft[0]["flags"])
    saved = saved_draft(dovecot, draft[0]["uid"])
    assert saved["In-Reply-To"] == "<m2@example.com>"
    assert saved["References"] == "<m0@example.com> <m1@example.com> <m2@example.com>"
    assert saved["Subject"] == "Re: Budget review"
    assert saved["From"] == "Secretary <secretary@example.com>"
    assert saved["To"] == "Ana Lima <ana@example.com>"
    assert saved.get_content() == "Yes: Thursday 10:00.\n\nSecretary\n"
    assert "Nothing was sent" in result.content
    assert without_recent(mailbox_state(dovecot)[0]["flags"]) == set()  # original untouched


async def test_reply_all_copies_everyone_but_us_and_honours_reply_to(
    mail: Services, dovecot: DovecotServer
) -> None:
    deliver(
        dovecot,
        message(
            "Re: Offsite",
            "Who comes?\n",
            to="Secretary <secretary@example.com>, Bo <bo@example.org>",
            Cc="Cy <cy@example.net>, ana@example.com",
            Reply_To="Team <team@example.com>",
        ),
    )

    result = await call(mail, draft_reply, uid=1, body="I do.", reply_all=True)

    assert result.structured["to"] == ["Team <team@example.com>"]
    assert result.structured["cc"] == [
        "Bo <bo@example.org>",
        "Cy <cy@example.net>",
        "ana@example.com",
    ]
    assert result.structured["subject"] == "Re: Offsite"  # not "Re: Re: Offsite"
    assert result.structured["references"] == ["<q3@example.com>"]


async def test_drafts_go_to_the_mailbox_the_server_marks_drafts(
    mail: Services, dovecot: DovecotServer
) -> None:
    """The setting names a mailbox that does not exist; the server's \\Drafts wins."""
    mail.settings[MailSettings] = mail_settings(dovecot, drafts_mailbox="Entwürfe")
    deliver(dovecot, message())
    result = await call(mail, draft_reply, uid=1, body="Thanks.")
    assert result.structured["drafts_mailbox"] == "Drafts"
    assert len(mailbox_state(dovecot, "Drafts")) == 1


async def test_move_and_archive_file_mail_and_report_the_new_uid(
    mail: Services, dovecot: DovecotServer
) -> None:
    doveadm(dovecot, "mailbox", "create", "-u", dovecot.user, "Receipts")
    deliver(dovecot, message("Receipt 1"))
    deliver(dovecot, message("Newsletter"))
    deliver(dovecot, message("Keep me"))

    moved = await call(mail, move_mail, uid=1, to_mailbox="Receipts")
    archived = await call(mail, archive_mail, uid=2)

    assert moved.structured["new_uid"] == 1
    assert "Moved uid 1 from 'INBOX' to 'Receipts'; there it is uid 1" in moved.content
    assert archived.structured["to_mailbox"] == "Archive"
    assert [m["subject"] for m in mailbox_state(dovecot)] == ["Keep me"]
    assert [m["subject"] for m in mailbox_state(dovecot, "Receipts")] == ["Receipt 1"]
    assert [m["subject"] for m in mailbox_state(dovecot, "Archive")] == ["Newsletter"]
    back = await call(
        mail, move_mail, uid=archived.structured["new_uid"], mailbox="Archive", to_mailbox="INBOX"
    )
    assert not back.is_error
    assert sorted(m["subject"] for m in mailbox_state(dovecot)) == ["Keep me", "Newsletter"]


async def test_moving_into_a_missing_mailbox_or_the_same_one_is_refused(
    mail: Services, dovecot: DovecotServer
) -> None:
    deliver(dovecot, message())
    missing = await refused(mail, move_mail, uid=1, to_mailbox="Recipts")
    assert "The mailbox 'Recipts' does not exist, so uid 1 was not moved" in missing
    assert "'Archive'" in missing and "'INBOX'" in missing
    same = await refused(mail, move_mail, uid=1, to_mailbox="INBOX")
    assert "already in 'INBOX'" in same
    await call(mail, archive_mail, uid=1)
    again = await refused(mail, archive_mail, uid=1, mailbox="Archive")
    assert "already in 'Archive', the Archive mailbox" in again
    assert len(mailbox_state(dovecot, "Archive")) == 1


async def test_flags_are_set_and_cleared(mail: Services, dovecot: DovecotServer) -> None:
    deliver(dovecot, message("Complaint"))

    high = await call(mail, flag_mail, uid=1, flags=["\\flagged", "$Important"])
    again = await call(mail, flag_mail, uid=1, flags=["\\Flagged"])
    assert without_recent(mailbox_state(dovecot)[0]["flags"]) == {"\\Flagged", "$Important"}
    assert without_recent(high.structured["flags"]) == {"\\Flagged", "$Important"}
    assert without_recent(again.structured["flags"]) == {"\\Flagged", "$Important"}

    cleared = await call(mail, flag_mail, uid=1, flags=["\\Flagged"], remove=True)
    assert "\\Flagged" not in cleared.structured["flags"]
    assert without_recent(mailbox_state(dovecot)[0]["flags"]) == {"$Important"}
    listed = await call(mail, search_mail)
    assert "$Important" in listed.structured["messages"][0]["flags"]


async def test_flags_that_delete_or_break_syntax_are_refused(
    mail: Services, dovecot: DovecotServer
) -> None:
    deliver(dovecot, message())
    deleted = await refused(mail, flag_mail, uid=1, flags=["\\Deleted"])
    assert "cannot set '\\\\Deleted'" in deleted
    for attack in ("x) UID EXPUNGE 1:* (", "a b", '"quoted"', "$Imp\r\nA1 LOGOUT"):
        text = await refused(mail, flag_mail, uid=1, flags=[attack])
        assert "is not a flag flag_mail can set" in text
    assert without_recent(mailbox_state(dovecot)[0]["flags"]) == set()


async def test_inbox_is_found_in_any_case(mail: Services, dovecot: DovecotServer) -> None:
    deliver(dovecot, message("Lower case"))
    listed = await call(mail, search_mail, mailbox="inbox")
    assert listed.structured["mailbox"] == "INBOX"
    moved = await call(mail, move_mail, uid=1, mailbox="Inbox", to_mailbox="Archive")
    assert moved.structured["from_mailbox"] == "INBOX"
    back = await call(
        mail, move_mail, uid=moved.structured["new_uid"], mailbox="Archive", to_mailbox="inbox"
    )
    assert back.structured["to_mailbox"] == "INBOX"
    assert [m["subject"] for m in mailbox_state(dovecot)] == ["Lower case"]


WITHOUT_MOVE = (
    "IMAP4rev1 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE IDLE SORT UNSELECT CHILDREN NAMESPACE "
    "UIDPLUS LIST-EXTENDED I18NLEVEL=1 ESEARCH SEARCHRES WITHIN LIST-STATUS SPECIAL-USE"
)


async def test_without_move_the_message_is_copied_and_only_it_expunged(
    mail: Services, dovecot: DovecotServer
) -> None:
    """A server that does not announce MOVE: COPY, \\Deleted, then UID EXPUNGE of that one
    uid, so another message already marked \\Deleted (waiting for the user's own expunge)
    stays."""
    stop(dovecot)
    with dovecot.config.open("a") as config:
        config.write(f"imap_capability = {WITHOUT_MOVE}\n")
    dovecot.start()
    deliver(dovecot, message("Move me"))
    deliver(dovecot, message("Deleted by the user, not yet expunged"))
    doveadm(
        dovecot, "flags", "add", "-u", dovecot.user, "\\Deleted", "mailbox", "INBOX", "uid", "2"
    )

    moved = await call(mail, archive_mail, uid=1)

    assert moved.structured["new_uid"] == 1
    assert [m["subject"] for m in mailbox_state(dovecot, "Archive")] == ["Move me"]
    inbox = mailbox_state(dovecot)
    assert [m["subject"] for m in inbox] == ["Deleted by the user, not yet expunged"]
    assert "\\Deleted" in inbox[0]["flags"]


async def test_mail_moves_into_and_out_of_non_ascii_mailboxes(
    mail: Services, dovecot: DovecotServer
) -> None:
    doveadm(dovecot, "mailbox", "create", "-u", dovecot.user, "Entwürfe & Notizen/台北")
    deliver(dovecot, message("Notiz"))

    moved = await call(mail, move_mail, uid=1, to_mailbox="Entwürfe & Notizen/台北")
    flagged = await call(
        mail,
        flag_mail,
        uid=moved.structured["new_uid"],
        flags=["$Wichtig"],
        mailbox="Entwürfe & Notizen/台北",
    )

    assert [m["subject"] for m in mailbox_state(dovecot, "Entwürfe & Notizen/台北")] == ["Notiz"]
    assert flagged.structured["flags"] == ["$Wichtig"]
    assert mailbox_state(dovecot) == []
