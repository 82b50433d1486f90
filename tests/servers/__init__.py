"""Real servers the tests start on loopback in temporary directories (Dovecot for IMAP)."""
