"""Subagents: child agents a session delegates to (the chapter's collaboration tools).

A child is a session of its own — its own trajectory under the five rules, model, system prompt,
tool set and limits — owned by the session that spawned it. See :mod:`.manager` for how children
run, end and hand over their results, :mod:`.definitions` for agent definitions, and
:mod:`.tools` for the tools on both sides.
"""
