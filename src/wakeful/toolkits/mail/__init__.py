"""The agent's mail tools over IMAP: search, read, draft a reply, move, archive, flag.

:mod:`.settings` is the `[tools.mail]` account (light, for `wakeful.config`); :mod:`.imap` is
the one adapter that talks to the server; :mod:`.mailbox_names` and :mod:`.search_query` build
command arguments that cannot smuggle IMAP syntax; :mod:`.message_text` turns MIME into text.
:mod:`.tools` assembles `MAIL_TOOLS`. This package imports nothing itself, so reading the
settings does not load the IMAP client.
"""
