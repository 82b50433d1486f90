"""MCP, both ways. As a client: :mod:`.client` (toolsets of configured servers), :mod:`.connection`
and :mod:`.transport` (one server's session, restarts, stdio or HTTP), :mod:`.config`, and what a
server may ask of us (:mod:`.input` for elicitation, :mod:`.sampling`, roots). Trust in third-party
servers: :mod:`.poisoning` and :mod:`.trust` scan tool text, :mod:`.pins` pins definitions by hash.
As a server: :mod:`.bridge` serves our tools. Nothing is imported here, so a module can be used
without loading the others."""
