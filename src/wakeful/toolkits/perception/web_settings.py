"""`WebSettings`: where the web tools search and how they fetch pages.

Every option has a default that works on one machine with internet access: search goes to
DuckDuckGo through the `ddgs` library, which needs no account. A SearXNG instance or a Brave
Search API key are the alternatives for a server that should not depend on scraping.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SearchBackend = Literal["ddgs", "searxng", "brave"]


class WebSettings(BaseModel):
    """Settings of web_search, fetch_url and get_page_metadata."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    search_backend: SearchBackend = "ddgs"
    """Which search service web_search asks: "ddgs" (DuckDuckGo and others, no key),
    "searxng" (a SearXNG instance at `searxng_url`) or "brave" (the Brave Search API)."""

    searxng_url: str = "http://127.0.0.1:8888"
    """The base URL of a SearXNG instance with the JSON format enabled."""

    brave_api_key_env: str = "BRAVE_API_KEY"
    """The environment variable that holds the Brave Search API key (the key itself is never
    stored in settings)."""

    brave_base_url: str = "https://api.search.brave.com"
    """The Brave Search API's base URL; `/res/v1/web/search` is added to it."""

    timeout_seconds: float = Field(default=20.0, gt=0, le=600)
    """How long one request may take, connecting and reading together."""

    max_page_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """The most bytes of one page that are downloaded; a longer page is cut there."""

    max_redirects: int = Field(default=5, ge=0, le=30)
    """How many redirects one fetch follows before it fails."""

    user_agent: str = "wakeful/0.1 (+https://github.com/wakeful; web perception tools)"
    """The User-Agent header of every request."""

    proxy: str | None = None
    """An HTTP(S) or SOCKS proxy URL for every request, e.g. "http://127.0.0.1:3128"; None uses
    the environment's proxy settings."""
