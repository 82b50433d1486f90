"""Market prices: exchange_rate (ECB reference rates via Frankfurter) and stock_quote (Stooq)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Annotated, Any

from pydantic import Field

from ...errors import ToolError
from ...services import settings_of
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .public_http import PublicDataSettings, check_status, fetch, json_body

_READS_THE_WORLD = ToolAnnotations(read_only=True, idempotent=True, open_world=True)

# --- exchange_rate -------------------------------------------------------------------------------

_CURRENCY = r"^[A-Za-z]{3}$"
_FIRST_RATE_DATE = dt.date(1999, 1, 4)


@tool(
    annotations=_READS_THE_WORLD,
    examples=(
        {"base": "EUR", "symbols": ["USD", "GBP"]},
        {"base": "USD"},
        {"base": "CHF", "symbols": ["JPY"], "date": "2020-03-02"},
    ),
)
async def exchange_rate(
    ctx: ToolContext,
    base: Annotated[
        str,
        Field(pattern=_CURRENCY, description="The ISO 4217 code to convert from, e.g. 'EUR'."),
    ],
    symbols: Annotated[
        list[Annotated[str, Field(pattern=_CURRENCY)]] | None,
        Field(
            min_length=1,
            max_length=40,
            description="ISO 4217 codes to convert to; all available ones when left out, "
            "e.g. ['USD', 'JPY'].",
        ),
    ] = None,
    date: Annotated[
        dt.date | None,
        Field(
            description="The day of the rates (YYYY-MM-DD, 1999-01-04 or later); the latest "
            "when left out. A weekend or holiday gives the working day before, e.g. "
            "'2024-05-17'.",
        ),
    ] = None,
) -> ToolResult:
    """Currency exchange rates: what one unit of `base` is worth in other currencies.

    Use it to convert amounts between currencies or to answer what a currency was worth on a
    past day. Multiply an amount by the rate to convert it.

    It does not cover cryptocurrencies or intraday rates: the rates are the European Central
    Bank's reference rates (about 30 currencies), set once per working day, via Frankfurter.

    Result: a header "1 EUR on 2024-05-17 (ECB reference rates)", then one line per currency:
    code and rate. structuredContent: {"base", "date", "rates": {"USD": 1.0866, …}}.

    Cost: one request, usually under 1 s; about 20 characters per currency.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    base = base.upper()
    wanted = sorted({s.upper() for s in symbols}) if symbols else None
    if date is not None:
        if date < _FIRST_RATE_DATE:
            raise ToolError(
                f"There are no reference rates for {date.isoformat()}: they start on "
                f"{_FIRST_RATE_DATE.isoformat()}. Pass that day or a later one."
            )
        if date > dt.date.today() + dt.timedelta(days=1):
            raise ToolError(
                f"{date.isoformat()} is in the future; there are no rates for it yet. Leave "
                "date out for the latest rates."
            )
    params: dict[str, str] = {"from": base}
    if wanted:
        params["to"] = ",".join(c for c in wanted if c != base) or base
    path = date.isoformat() if date is not None else "latest"
    response = await fetch(
        settings,
        "exchange_rate",
        "Frankfurter",
        f"{settings.exchange_rate_url.rstrip('/')}/{path}",
        params=params,
        services=ctx.services,
    )
    if response.status_code in (404, 422):
        codes = ", ".join([base, *(wanted or [])])
        raise ToolError(
            f"Frankfurter does not know one of the currency codes {codes} (HTTP "
            f"{response.status_code}). It has about 30 currencies, e.g. EUR, USD, GBP, JPY, "
            "CHF, CNY; call exchange_rate with only base to list them."
        )
    check_status(response, "Frankfurter")
    data = json_body(response, "Frankfurter")
    rates = dict(data.get("rates") or {}) if isinstance(data, dict) else {}
    if wanted and base in wanted:
        rates[base] = 1.0
    missing = [c for c in (wanted or []) if c not in rates]
    if missing:
        raise ToolError(
            f"Frankfurter has no rate for {', '.join(missing)}: not a currency it knows. Call "
            "exchange_rate with only base to list the codes it has."
        )
    day = str(data.get("date", path))
    lines = [f"1 {base} on {day} (ECB reference rates, via Frankfurter)"]
    lines += [f"{code}\t{rate}" for code, rate in sorted(rates.items())]
    return ToolResult("\n".join(lines), structured={"base": base, "date": day, "rates": rates})


# --- stock_quote ---------------------------------------------------------------------------------


@tool(
    annotations=_READS_THE_WORLD,
    examples=({"symbol": "AAPL"}, {"symbol": "sap.de"}, {"symbol": "^spx"}),
)
async def stock_quote(
    ctx: ToolContext,
    symbol: Annotated[
        str,
        Field(
            pattern=r"^\^?[A-Za-z0-9][A-Za-z0-9._-]{0,19}$",
            description="A ticker; a bare one is a US stock, other markets take Stooq's "
            "suffix (.de, .uk, .jp) and indices start with ^, e.g. 'MSFT'.",
        ),
    ],
) -> ToolResult:
    """The latest quote of a stock, ETF or index: open, high, low, close and volume, from Stooq.

    Use it when the user asks what a share or index is trading at, or how it moved today.

    It does not give real-time prices (quotes are delayed 15 minutes or more), history, or
    fundamentals, and cannot search for a company's ticker by its name.

    Result: a line "AAPL.US on 2024-05-17 22:00:09: close 189.87 (open 189.51, high 190.81,
    low 189.18), volume 41,282,925". structuredContent: {"symbol", "date", "time", "open",
    "high", "low", "close", "volume"}.

    Cost: one request, usually under 1 s; about 120 characters.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    asked = symbol.lower() if "." in symbol or symbol.startswith("^") else f"{symbol.lower()}.us"
    response = await fetch(
        settings,
        "stock_quote",
        "Stooq",
        settings.stock_quote_url,
        params={"s": asked, "f": "sd2t2ohlcv", "h": "", "e": "csv"},
        services=ctx.services,
    )
    check_status(response, "Stooq")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    if not rows or "Close" not in rows[0]:
        raise ToolError(
            f"Stooq answered with something that is not a quote table "
            f"({response.text[:120]!r}). Try again later."
        )
    row = rows[0]
    if row.get("Close") in (None, "", "N/D"):
        raise ToolError(
            f"Stooq knows no symbol {asked!r}. Check the ticker; for markets outside the US add "
            "Stooq's suffix (e.g. 'sap.de', 'vod.uk'), and start indices with ^ (e.g. '^spx')."
        )
    quote_data: dict[str, Any] = {
        "symbol": row.get("Symbol", asked.upper()),
        "date": row.get("Date"),
        "time": row.get("Time"),
    }
    for key in ("Open", "High", "Low", "Close"):
        quote_data[key.lower()] = _number(row.get(key))
    volume = _number(row.get("Volume"))
    quote_data["volume"] = int(volume) if volume is not None else None
    shown_volume = f"{quote_data['volume']:,}" if quote_data["volume"] is not None else "unknown"
    text = (
        f"{quote_data['symbol']} on {quote_data['date']} {quote_data['time']}: close "
        f"{quote_data['close']} (open {quote_data['open']}, high {quote_data['high']}, low "
        f"{quote_data['low']}), volume {shown_volume}. Delayed quote from Stooq."
    )
    return ToolResult(text, structured=quote_data)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "", "N/D") else None
    except ValueError:
        return None
