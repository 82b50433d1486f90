"""The real Dovecot the tests start on loopback: `wakeful.demo.mail_servers`, which the email demo
uses too (one launcher for both)."""

from wakeful.demo.mail_servers import (
    DovecotServer,
    DovecotUnavailable,
    SmtpRelay,
    dovecot_missing,
    start_dovecot,
)

__all__ = ["DovecotServer", "DovecotUnavailable", "SmtpRelay", "dovecot_missing", "start_dovecot"]
