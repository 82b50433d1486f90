"""Signature checks of the three schemes, against the vectors their publishers document, and
against the forgeries an attacker would try first."""

from __future__ import annotations

import pytest

from wakeful.channels.webhooks.signatures import (
    SignatureRejected,
    decode_standard_secret,
    sign_github,
    sign_slack,
    sign_standard,
    verify_github,
    verify_slack,
    verify_standard,
)

# Standard Webhooks' reference test vector (the spec's libraries test against it).
SW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SW_TIMESTAMP = 1614265330
SW_BODY = b'{"test": 2432232314}'
SW_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

# Slack's documented example ("Verifying requests from Slack").
SLACK_SECRET = b"8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TIMESTAMP = 1531420618
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
    b"collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885"
    b"554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447f"
    b"ce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def sw_headers(signature: str = SW_SIGNATURE, timestamp: int = SW_TIMESTAMP) -> dict[str, str]:
    return {
        "webhook-id": SW_ID,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


def test_standard_webhooks_reference_vector_verifies() -> None:
    key = decode_standard_secret(SW_SECRET)
    assert sign_standard(key, SW_ID, SW_TIMESTAMP, SW_BODY) == SW_SIGNATURE
    assert verify_standard(key, sw_headers(), SW_BODY, now=SW_TIMESTAMP + 10) == SW_ID


def test_standard_webhooks_accepts_any_of_several_signatures_during_rotation() -> None:
    key = decode_standard_secret(SW_SECRET)
    several = f"v1,b2xkIHNlY3JldCBzaWduYXR1cmUgb2YgdGhlIHJpZ2h0IHNpemU= {SW_SIGNATURE} v1a,xyz"
    assert verify_standard(key, sw_headers(several), SW_BODY, now=SW_TIMESTAMP) == SW_ID


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        (sw_headers(), b'{"test": 2432232315}', "does not match"),  # body changed by one digit
        (sw_headers("v1," + "A" * 44), SW_BODY, "does not match"),
        (sw_headers("v2," + SW_SIGNATURE[3:]), SW_BODY, "no v1 signature"),
        ({"webhook-id": SW_ID, "webhook-timestamp": str(SW_TIMESTAMP)}, SW_BODY, "missing"),
        ({"webhook-signature": SW_SIGNATURE, "webhook-id": SW_ID}, SW_BODY, "missing"),
        (sw_headers(timestamp=SW_TIMESTAMP + 1), SW_BODY, "does not match"),
    ],
)
def test_standard_webhooks_forgeries_are_rejected(
    headers: dict[str, str], body: bytes, reason: str
) -> None:
    key = decode_standard_secret(SW_SECRET)
    with pytest.raises(SignatureRejected, match=reason):
        verify_standard(key, headers, body, now=SW_TIMESTAMP)


def test_standard_webhooks_wrong_secret_is_rejected() -> None:
    other = decode_standard_secret("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY")
    with pytest.raises(SignatureRejected, match="does not match"):
        verify_standard(other, sw_headers(), SW_BODY, now=SW_TIMESTAMP)


@pytest.mark.parametrize(("offset", "word"), [(-301, "old"), (301, "future")])
def test_a_timestamp_outside_the_replay_window_is_rejected_with_its_age(
    offset: int, word: str
) -> None:
    key = decode_standard_secret(SW_SECRET)
    with pytest.raises(SignatureRejected, match=rf"301 s .*{word}.*replay window of 300 s"):
        verify_standard(key, sw_headers(), SW_BODY, now=SW_TIMESTAMP - offset)


def test_a_timestamp_that_is_not_whole_seconds_is_rejected() -> None:
    key = decode_standard_secret(SW_SECRET)
    headers = {**sw_headers(), "webhook-timestamp": "2021-02-25T15:02:10Z"}
    with pytest.raises(SignatureRejected, match="whole seconds"):
        verify_standard(key, headers, SW_BODY, now=SW_TIMESTAMP)


@pytest.mark.parametrize(
    ("secret", "problem"), [("whsec_not base64!", "base64"), ("whsec_c2hvcnQ=", "16 bytes")]
)
def test_a_malformed_standard_secret_says_what_is_wrong(secret: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        decode_standard_secret(secret)


def test_github_documented_example_verifies() -> None:
    # From GitHub's "Validating webhook deliveries".
    secret, body = b"It's a Secret to Everybody", b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign_github(secret, body) == expected
    headers = {"x-hub-signature-256": expected, "x-github-delivery": "d1"}
    assert verify_github(secret, headers, body) == "d1"


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"x-github-delivery": "d1"}, "X-Hub-Signature-256 header is missing"),
        ({"x-hub-signature-256": "sha1=abc", "x-github-delivery": "d1"}, "sha256="),
        ({"x-hub-signature-256": "sha256=" + "0" * 64, "x-github-delivery": "d1"}, "match"),
    ],
)
def test_github_forgeries_are_rejected(headers: dict[str, str], reason: str) -> None:
    with pytest.raises(SignatureRejected, match=reason):
        verify_github(b"It's a Secret to Everybody", headers, b"Hello, World!")


def test_slack_documented_example_verifies() -> None:
    assert sign_slack(SLACK_SECRET, SLACK_TIMESTAMP, SLACK_BODY) == SLACK_SIGNATURE
    headers = {
        "x-slack-request-timestamp": str(SLACK_TIMESTAMP),
        "x-slack-signature": SLACK_SIGNATURE,
    }
    verify_slack(SLACK_SECRET, headers, SLACK_BODY, now=SLACK_TIMESTAMP + 60)
    with pytest.raises(SignatureRejected, match="replay window"):
        verify_slack(SLACK_SECRET, headers, SLACK_BODY, now=SLACK_TIMESTAMP + 301)
    with pytest.raises(SignatureRejected, match="does not match"):
        verify_slack(SLACK_SECRET, headers, SLACK_BODY + b"&x=1", now=SLACK_TIMESTAMP)
    replayed_later = {**headers, "x-slack-request-timestamp": str(SLACK_TIMESTAMP + 400)}
    with pytest.raises(SignatureRejected, match="does not match"):
        verify_slack(SLACK_SECRET, replayed_later, SLACK_BODY, now=SLACK_TIMESTAMP + 400)
