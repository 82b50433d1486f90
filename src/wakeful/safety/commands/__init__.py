"""The shell command policy: commands are parsed (tree-sitter-bash), not string-matched, and
every simple command in them is judged allow / ask / deny with reasons."""

from __future__ import annotations

from .policy import CommandDecision, CommandPolicy, PolicySettings

__all__ = ["CommandDecision", "CommandPolicy", "PolicySettings"]
