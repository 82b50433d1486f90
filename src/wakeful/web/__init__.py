"""The web console: chat with the agent, answer its questions and watch its work in a browser.

`WebConsole(runtime, auth).app` is the starlette app; `serve_console` runs it with uvicorn in the
runtime's event loop (`wakeful run --web`). See :mod:`.auth` for how it is secured.
"""

from .app import WebConsole, serve_console
from .auth import ConsoleAuth, new_token

__all__ = ["ConsoleAuth", "WebConsole", "new_token", "serve_console"]
