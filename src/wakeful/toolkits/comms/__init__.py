"""User communication: tools that reach the user."""
