"""The PostgreSQL server and a fresh database per test (see tests/servers/postgres.py)."""

from servers.postgres import postgres_server, postgres_url  # noqa: F401
