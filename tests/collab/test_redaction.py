"""Redaction: each detector, private fields of the profile, and the shapes attackers use to slip
a value past a scrubber (split over lines, glued to other numbers, respaced, repeated)."""

from __future__ import annotations

import pytest

from wakeful.collab import RedactionSettings, Redactor
from wakeful.collab.redaction import iban_valid, luhn_valid

CARD = "4111 1111 1111 1111"
IBAN = "DE89 3704 0044 0532 0130 00"


def scrub(text: str, **settings: object) -> str:
    return Redactor(RedactionSettings.model_validate(settings)).scrub(text)


def test_the_checksums_match_known_numbers() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid("5500005555555559")
    assert not luhn_valid("4111111111111112")
    assert iban_valid("DE89370400440532013000")
    assert iban_valid("GB82WEST12345698765432")
    assert not iban_valid("DE89370400440532013001")


@pytest.mark.parametrize(
    "text",
    [
        f"my card is {CARD}, thanks",
        "my card is 4111111111111111",
        "my card is 4111-1111-1111-1111",
        "my card is 4111 1111\n1111 1111",  # split over lines
        "my card is 4111 1111 \n> 1111 1111",  # split inside a quoted email reply
        "ref 2026 4111 1111 1111 1111",  # glued to a reference number
        "4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",  # spaced out digit by digit
    ],
)
def test_card_numbers_are_caught_however_they_are_written(text: str) -> None:
    scrubbed = scrub(text)
    assert "[redacted: card_number]" in scrubbed
    digits = "".join(c for c in scrubbed if c.isdigit())
    assert "41111111" not in digits and "11111111" not in digits


def test_numbers_that_are_no_card_stay() -> None:
    text = "order 4111111111111112 shipped on 2026-12-01, call +1 415 555 0100"
    assert scrub(text) == text


@pytest.mark.parametrize(
    "text",
    [
        f"IBAN {IBAN} please",
        "IBAN DE89370400440532013000",
        "iban de89 3704 0044\n0532 0130 00",
        "ref AB12 DE89 3704 0044 0532 0130 00",  # a false start right before it
    ],
)
def test_ibans_are_caught_whole(text: str) -> None:
    scrubbed = scrub(text)
    assert "[redacted: iban]" in scrubbed
    assert "3704" not in scrubbed and "0130" not in scrubbed.replace(" ", "")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("the password is hunter2, ok", "the password is "),
        ("Password:\n  hunter2", "Password:\n  "),
        ("pwd=hunter2", "pwd="),
        ("PIN: 4921", "PIN: "),
        ("CVV 123 on the back", "CVV "),
        ("api_key = abcdef123456", "api_key = "),
    ],
)
def test_labelled_secrets_keep_their_label(text: str, kept: str) -> None:
    scrubbed = scrub(text)
    assert scrubbed.startswith(kept)
    assert "hunter2" not in scrubbed and "4921" not in scrubbed and "123 " not in scrubbed
    assert "abcdef123456" not in scrubbed


def test_keys_tokens_and_ssns() -> None:
    text = (
        "key sk-abcdefghijklmnopqrstuvwx, github ghp_" + "a" * 36 + ", aws AKIAABCDEFGHIJKLMNOP, "
        "ssn 123-45-6789"
    )
    scrubbed = scrub(text)
    assert scrubbed.count("[redacted: api_key]") == 3
    assert "[redacted: us_ssn]" in scrubbed
    assert "sk-abc" not in scrubbed and "6789" not in scrubbed


def test_scrubbing_twice_changes_nothing_more() -> None:
    redactor = Redactor(RedactionSettings())
    once = redactor.scrub(f"password: hunter2 and card {CARD}")
    assert redactor.scrub(once) == once


def test_a_detector_can_be_switched_off_and_patterns_added() -> None:
    text = f"card {CARD}, order pin PIN-123456"
    scrubbed = scrub(text, builtin=["iban"], patterns={"order_pin": r"PIN-\d{6}"})
    assert CARD in scrubbed
    assert "[redacted: order_pin]" in scrubbed and "123456" not in scrubbed


def test_private_profile_fields_are_scrubbed_wherever_their_values_were_copied() -> None:
    profile = {
        "name": "Ana Silva",
        "payment": {"card": "Visa ending 4242", "holder": "Ana M. Silva"},
        "accounts": {"bank": {"password": "correct-horse"}},
    }
    settings = RedactionSettings(fields=("profile.payment", "password"))
    redactor = Redactor(settings, profile)
    assert redactor.private_field(("payment", "card")) == "profile.payment"
    assert redactor.private_field(("accounts", "bank", "password")) == "password"
    assert redactor.private_field(("name",)) is None
    text = (
        "User said: pay with my VISA\nending 4242; the card (4242) is on file. "
        "Holder ana m silva. Login correct horse."
    )
    scrubbed = redactor.scrub(text)
    assert "4242" not in scrubbed
    assert "ana m silva" not in scrubbed.lower()
    assert "horse" not in scrubbed
    assert redactor.counts["profile.payment"] >= 2
    assert redactor.counts["password"] == 1


def test_short_private_values_are_withheld_but_not_scrubbed_from_free_text() -> None:
    redactor = Redactor(RedactionSettings(fields=("profile.vip",)), {"vip": "no"})
    assert redactor.private_field(("vip",)) == "profile.vip"
    assert redactor.scrub("no, thanks") == "no, thanks"


def test_private_tool_results_are_named() -> None:
    redactor = Redactor(RedactionSettings(fields=("tool.get_wallet",)))
    assert redactor.private_tool("get_wallet")
    assert not redactor.private_tool("search_flights")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my old password was: Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("the passcode is: 771902", "771902"),
        ("staging db postgres://app:S3cretPass@db.internal/app", "S3cretPass"),
    ],
)
def test_labels_with_a_colon_after_the_verb_and_url_passwords(text: str, secret: str) -> None:
    scrubbed = scrub(text)
    assert secret not in scrubbed
    assert "[redacted: " in scrubbed


def test_url_passwords_keep_the_rest_of_the_url() -> None:
    assert scrub("postgres://app:S3cretPass@db.internal/app") == (
        "postgres://app:[redacted: url_password]@db.internal/app"
    )


def test_a_private_number_is_found_however_it_is_spaced() -> None:
    redactor = Redactor(RedactionSettings(fields=("profile.nif",)), {"nif": "245678901"})
    for written in ("245678901", "245 678 901", "245-678-901", "245.678\n901"):
        assert redactor.scrub(f"tax id {written}.") == "tax id [redacted: profile.nif]."


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("env dump: DB_PASSWORD=pg-Pr0d-7731 HOME=/root", "pg-Pr0d-7731"),
        ("GITHUB_TOKEN=abc123def456", "abc123def456"),
        ("SECRET_KEY_BASE: 9f8e7d6c", "9f8e7d6c"),
        ("REDIS_URL=redis://:rds-secret-99@cache:6379", "rds-secret-99"),
    ],
)
def test_environment_style_secrets(text: str, secret: str) -> None:
    scrubbed = scrub(text)
    assert secret not in scrubbed
    assert "[redacted: " in scrubbed


def test_a_bare_token_word_is_left_alone() -> None:
    text = "the token budget is 2000 and each token: costs little"
    assert scrub(text) == text
