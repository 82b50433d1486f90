"""The execution server: tools that change the world, each behind the safety stack.

Each family is a module (`files`, `shell_exec`, `interpreter`, `spreadsheets`, `email`,
`calendar_events`, `webhook`, `github`); :mod:`.server` assembles them into `EXECUTION_TOOLS` and
:func:`~.server.execution_server`. This package imports nothing itself, so one family can be used
without loading the others' libraries.
"""
