"""Collaboration: tools that bring in a person (an approver, a collaborator) rather than the
end user: requests for a decision or input (`human`), and notifications (`notify`).

This package module imports nothing, so the configuration can load its `settings` alone."""
