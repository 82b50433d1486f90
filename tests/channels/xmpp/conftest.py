from servers.fixtures import prosody  # noqa: F401
