"""The mail of the email demo (experiment 4-4): what arrives, and the user's calendar.

Four messages reach the user's mailbox: a meeting invitation with an .ics that clashes with an
appointment in the user's calendar, a customer complaint, a marketing mail, and a social
network's notification that the channel's filter keeps from the agent. They are built with the
standard library's `email` package, with the headers real mail has (Message-ID, Date,
Authentication-Results as the receiving server wrote them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid

__all__ = [
    "CALENDAR_ICS",
    "USER_ADDRESS",
    "DemoMail",
    "demo_mails",
]

USER_ADDRESS = "secretary@example.test"
USER_NAME = "Robin Lee"
MEETING_START = datetime(2027, 1, 14, 14, 0, tzinfo=UTC)
MEETING_END = datetime(2027, 1, 14, 15, 0, tzinfo=UTC)

# The user's calendar: the dentist at 14:30 clashes with the invitation's 14:00-15:00.
CALENDAR_ICS = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//wakeful//demo//EN
BEGIN:VEVENT
UID:dentist-2027-01-14@example.test
DTSTAMP:20261201T090000Z
DTSTART:20270114T143000Z
DTEND:20270114T153000Z
SUMMARY:Dentist
END:VEVENT
BEGIN:VEVENT
UID:standup-2027-01-14@example.test
DTSTAMP:20261201T090000Z
DTSTART:20270114T090000Z
DTEND:20270114T091500Z
SUMMARY:Team stand-up
END:VEVENT
END:VCALENDAR
"""

_INVITE_ICS = f"""\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//Partner Corp//Calendar//EN
METHOD:REQUEST
BEGIN:VEVENT
UID:q1-planning-2027@partner.example
DTSTAMP:20261201T080000Z
DTSTART:{MEETING_START:%Y%m%dT%H%M%SZ}
DTEND:{MEETING_END:%Y%m%dT%H%M%SZ}
SUMMARY:Q1 planning
ORGANIZER;CN=Dana Smith:mailto:dana@partner.example
ATTENDEE;CN={USER_NAME};RSVP=TRUE:mailto:{USER_ADDRESS}
END:VEVENT
END:VCALENDAR
"""


@dataclass(frozen=True)
class DemoMail:
    """One message of the demo: its name in the scenario and its bytes."""

    name: str
    sender: str
    raw: bytes


def _message(sender: str, subject: str, body: str, when: datetime) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = f"{USER_NAME} <{USER_ADDRESS}>"
    message["Subject"] = subject
    message["Date"] = format_datetime(when)
    message["Message-ID"] = make_msgid(domain=sender.rsplit("@", 1)[1].rstrip(">"))
    address = sender.rsplit("<", 1)[-1].rstrip(">")
    domain = address.rsplit("@", 1)[1]
    message["Authentication-Results"] = (
        f"mx.example.test; spf=pass smtp.mailfrom={address}; dkim=pass header.d={domain}; "
        f"dmarc=pass header.from={domain}"
    )
    message.set_content(body)
    return message


def demo_mails(now: datetime | None = None) -> list[DemoMail]:
    """The four messages, in the order they arrive."""
    when = now or datetime.now(UTC)
    invite = _message(
        "Dana Smith <dana@partner.example>",
        "Invitation: Q1 planning @ Thu 14 Jan 2027 14:00-15:00 (UTC)",
        "Hi Robin,\n\nI'd like to go through the Q1 plan with you. Does Thursday 14 January, "
        "14:00-15:00 UTC work?\n\nDana",
        when,
    )
    invite.add_attachment(
        _INVITE_ICS.encode(),
        maintype="text",
        subtype="calendar",
        filename="invite.ics",
        params={"method": "REQUEST"},
    )
    complaint = _message(
        "Alex Moreno <alex.moreno@customer.example>",
        "Order #48213 arrived broken - I want a refund",
        "Hello,\n\nMy order #48213 (a Nordic oak desk, 329.00 EUR) was delivered on 27 November "
        "with a cracked top. This is the second time: order #47102 had the same problem. I have "
        "photos. I want a full refund by Friday 4 December, or I will dispute the payment with "
        "my bank.\n\nAlex Moreno\n+44 20 7946 0958",
        when,
    )
    marketing = _message(
        "MegaStore Deals <deals@megastore.example>",
        "Black Friday: 70% off everything, today only!",
        "Don't miss out! 70% off every item in the store until midnight. Shop now at "
        "https://megastore.example/deals\n\nUnsubscribe: https://megastore.example/unsubscribe",
        when,
    )
    marketing["List-Unsubscribe"] = "<https://megastore.example/unsubscribe>"
    marketing["Precedence"] = "bulk"
    social = _message(
        "SocialNet <noreply@socialnet.example>",
        "You have 3 new followers",
        "Jamie, Sam and 1 other started following you.",
        when,
    )
    return [
        DemoMail("invitation", "dana@partner.example", invite.as_bytes()),
        DemoMail("complaint", "alex.moreno@customer.example", complaint.as_bytes()),
        DemoMail("marketing", "deals@megastore.example", marketing.as_bytes()),
        DemoMail("social", "noreply@socialnet.example", social.as_bytes()),
    ]
