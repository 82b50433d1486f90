"""Triggers: tools with which the agent asks the world to wake it — timers and shell monitors."""
