"""Public data tools: weather, Wikipedia, arXiv, exchange rates and stock quotes.

Each asks one keyless public service (see :class:`PublicDataSettings` for which, and how to point
it elsewhere) and turns the answer into a short text for the model plus the same facts as
structured data. Nothing here needs an account or a key.
"""

from ...tools.spec import Tool
from .arxiv import arxiv_search
from .markets import exchange_rate, stock_quote
from .public_http import PublicDataSettings
from .weather import get_weather
from .wikipedia import wikipedia_page, wikipedia_search

PUBLIC_DATA_TOOLS: tuple[Tool, ...] = (
    get_weather,
    wikipedia_search,
    wikipedia_page,
    arxiv_search,
    exchange_rate,
    stock_quote,
)
"""Weather, Wikipedia, arXiv, exchange rates and stock quotes from keyless public services."""

__all__ = [
    "PUBLIC_DATA_TOOLS",
    "PublicDataSettings",
    "arxiv_search",
    "exchange_rate",
    "get_weather",
    "stock_quote",
    "wikipedia_page",
    "wikipedia_search",
]
