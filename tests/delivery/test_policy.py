"""The delivery policy as a function: which channels a message goes to, now and later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from wakeful.delivery.policy import Presence, digest_time, plan_delivery, quiet_until
from wakeful.delivery.settings import DeliverySettings

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CHANNELS = ["console", "telegram:me", "email:work"]
AWAY = Presence()
AT_CONSOLE = Presence("console", NOON)
ON_PHONE = Presence("telegram:me", NOON)


def plan(urgency: str, presence: Presence = AT_CONSOLE, **settings: object):  # type: ignore[no-untyped-def]
    return plan_delivery(
        urgency=urgency,
        home="console",
        presence=presence,
        reachable=CHANNELS,
        settings=DeliverySettings.model_validate(settings),
        now=NOON,
    )


def test_normal_goes_where_the_user_is_and_only_there() -> None:
    assert plan("normal").now == ("console",)
    assert plan("normal", ON_PHONE).now == ("telegram:me",)
    assert plan("normal", AWAY).now == ("console",)  # the conversation's own channel
    assert plan("normal").later == ()


def test_high_adds_one_push_channel() -> None:
    assert plan("high").now == ("console", "telegram:me")
    assert plan("high", ON_PHONE).now == ("telegram:me", "email:work")


def test_urgent_starts_where_the_user_is_then_escalates_while_unread() -> None:
    urgent = plan("urgent", escalate_after_minutes=5)
    assert urgent.now == ("console",)
    assert [(s.channel, s.at - NOON, s.reason) for s in urgent.later] == [
        ("telegram:me", timedelta(minutes=5), "escalation"),
        ("email:work", timedelta(minutes=10), "escalation"),
    ]
    assert "every 5 min while unread" in urgent.why


def test_urgent_for_an_absent_user_starts_on_their_phone_not_the_console() -> None:
    urgent = plan("urgent", AWAY)
    assert urgent.now == ("telegram:me",)
    assert [s.channel for s in urgent.later] == ["console", "email:work"]


def test_low_waits_for_a_digest_unless_the_user_is_at_the_console() -> None:
    assert plan("low").now == ("console",)
    low = plan("low", ON_PHONE, digest_every_minutes=60)
    assert low.now == ()
    assert [(s.channel, s.at, s.reason) for s in low.later] == [
        ("telegram:me", NOON + timedelta(hours=1), "digest")
    ]


def test_messages_sent_close_together_share_one_digest() -> None:
    settings = DeliverySettings(digest_every_minutes=30)
    times = {digest_time(NOON + timedelta(minutes=m), settings) for m in (1, 7, 29)}
    assert times == {NOON + timedelta(minutes=30)}


def test_quiet_hours_hold_what_would_disturb_until_they_end() -> None:
    quiet = {"start": "11:00", "end": "13:30", "allow": ["urgent"]}
    high = plan("high", quiet_hours=quiet, timezone="UTC")
    assert high.now == ("console",)  # the console shows, it never disturbs
    assert [(s.channel, s.at, s.reason) for s in high.later] == [
        ("telegram:me", NOON.replace(hour=13, minute=30), "quiet hours")
    ]
    assert "held until the quiet hours end at 13:30 UTC" in high.why
    assert plan("urgent", AWAY, quiet_hours=quiet).now == ("telegram:me",)


def test_quiet_hours_spanning_midnight_in_the_users_timezone() -> None:
    settings = DeliverySettings.model_validate(
        {"quiet_hours": {"start": "22:00", "end": "07:00"}, "timezone": "Europe/Paris"}
    )
    # 22:30 UTC is 23:30 in Paris (UTC+1 in December): quiet until 07:00 Paris = 06:00 UTC.
    late = datetime(2026, 12, 1, 22, 30, tzinfo=UTC)
    assert quiet_until(late, settings) == datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    assert quiet_until(datetime(2026, 12, 2, 7, 0, tzinfo=UTC), settings) is None


def test_a_channel_carries_only_what_is_urgent_enough_for_it() -> None:
    only_urgent = {"min_urgency": {"email:work": "urgent"}, "channels": CHANNELS}
    assert plan("high", ON_PHONE, **only_urgent).now == ("telegram:me",)
    assert [s.channel for s in plan("urgent", **only_urgent).later] == [
        "telegram:me",
        "email:work",
    ]


def test_a_channel_that_is_not_the_users_keeps_what_the_sender_asked() -> None:
    operator = plan_delivery(
        urgency="high",
        home="operator",
        presence=AT_CONSOLE,
        reachable=CHANNELS,
        settings=DeliverySettings(),
        now=NOON,
    )
    assert operator.now == ("operator",)


def test_a_plan_made_again_after_a_restart_keeps_its_original_times() -> None:
    created = NOON - timedelta(minutes=7)
    again = plan_delivery(
        urgency="urgent",
        home="console",
        presence=AWAY,
        reachable=CHANNELS,
        settings=DeliverySettings(escalate_after_minutes=5),
        now=NOON,
        created_at=created,
    )
    assert [s.at for s in again.later] == [
        created + timedelta(minutes=5),
        created + timedelta(minutes=10),
    ]


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"channels": []}, "channels is empty"),
        ({"channels": ["console", "console"]}, "names console more than once"),
        ({"timezone": "Mars/Olympus"}, "is not a timezone name"),
        ({"quiet_hours": {"start": "25:00", "end": "07:00"}}, "quiet_hours.start"),
        ({"channels": ["console"], "min_urgency": {"email:work": "high"}}, "email:work"),
        ({"min_urgency": {"email:work": "very"}}, "min_urgency.email:work"),
        ({"escalate_after_minutes": 0}, "escalate_after_minutes"),
        ({"escalate": 5}, "escalate"),
    ],
)
def test_bad_delivery_settings_say_what_to_fix(table: dict[str, object], named: str) -> None:
    with pytest.raises(ValidationError) as caught:
        DeliverySettings.model_validate(table)
    assert named in str(caught.value)
