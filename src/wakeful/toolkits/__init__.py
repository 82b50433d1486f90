"""The built-in tools, one package per family: :mod:`.perception` (gather information, change
nothing), :mod:`.execution` (change the world, behind the safety stack), :mod:`.triggers` (timers
and shell monitors: the world wakes the agent), :mod:`.comms` (reach the user) and :mod:`.tasks`
(background tasks). A family with a `server` module is also an MCP server
(`wakeful mcp serve <family>`, built on :mod:`wakeful.mcp.bridge`). Nothing is imported here, so a
tool module can be used without loading the MCP SDK."""
