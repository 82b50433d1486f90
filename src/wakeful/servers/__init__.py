"""MCP servers that wakeful runs: the bridge that serves our tools (:mod:`.bridge`), and the
servers built on it (:mod:`.perception`, :mod:`.execution`). Nothing is imported here, so a tool
module can be used without loading the MCP SDK."""
