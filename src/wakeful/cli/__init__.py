"""The `wakeful` command: :mod:`.app` builds the Typer application; each other module here
adds one command or command group to it through its `register(app)`."""

from .app import app, main

__all__ = ["app", "main"]
