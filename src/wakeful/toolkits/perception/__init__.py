"""The perception server: tools that gather information and change nothing.

Each family is a module (`read_file`, `grep_file`, `documents`, `web`, `weather`, …);
:mod:`.server` assembles them into `PERCEPTION_TOOLS` and :func:`~.server.perception_server`.
This package imports nothing itself, so one tool (or a helper such as :mod:`.workspace`) can be
used without loading every family's libraries.
"""
