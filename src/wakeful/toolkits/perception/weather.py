"""get_weather: current weather and a daily forecast from Open-Meteo, by city or coordinates."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ...errors import ToolError
from ...services import Services, settings_of
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .public_http import PublicDataSettings, check_status, fetch, json_body

_READS_THE_WORLD = ToolAnnotations(read_only=True, idempotent=True, open_world=True)

# WMO weather interpretation codes, as Open-Meteo reports them.
_WEATHER_CODES = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "freezing drizzle",
    61: "light rain",
    63: "rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "freezing rain",
    71: "light snow",
    73: "snow",
    75: "heavy snow",
    77: "snow grains",
    80: "light rain showers",
    81: "rain showers",
    82: "violent rain showers",
    85: "light snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with light hail",
    99: "thunderstorm with heavy hail",
}
_CURRENT = "temperature_2m,relative_humidity_2m,weather_code,wind_speed_10m"
_DAILY = (
    "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum,"
    "precipitation_probability_max"
)


# --- get_weather ---------------------------------------------------------------------------------


@tool(
    annotations=_READS_THE_WORLD,
    examples=(
        {"city": "Berlin"},
        {"city": "Paris, France", "days": 7},
        {"latitude": 52.52, "longitude": 13.41, "days": 1},
    ),
)
async def get_weather(
    ctx: ToolContext,
    city: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            description="A place name, optionally with its country after a comma; the best "
            "match is used. Give it or latitude and longitude, e.g. 'Lyon, France'.",
        ),
    ] = None,
    latitude: Annotated[
        float | None,
        Field(ge=-90, le=90, description="Latitude in degrees, with longitude, e.g. 52.52."),
    ] = None,
    longitude: Annotated[
        float | None,
        Field(ge=-180, le=180, description="Longitude in degrees, with latitude, e.g. 13.41."),
    ] = None,
    days: Annotated[
        int,
        Field(ge=1, le=16, description="Days of daily forecast, today first (1-16), e.g. 3."),
    ] = 3,
) -> ToolResult:
    """Current weather and a daily forecast for a city or coordinates, from Open-Meteo.

    Use it when the user asks about the weather, temperature, rain or wind somewhere, now or in
    the next days. Give a city name, or latitude and longitude when the place is not a town.

    It does not give past weather, hourly detail or weather warnings, and cannot tell which of
    two towns of the same name is meant unless the country follows the name.

    Result: a header with the place and its time zone, a line of current conditions (°C,
    humidity, wind km/h), then one line per day: date, conditions, min/max °C, precipitation mm
    and its chance. structuredContent: {"place", "latitude", "longitude", "timezone", "current",
    "daily": [{"date", "conditions", "min_c", "max_c", "precipitation_mm",
    "precipitation_chance"}]}.

    Cost: one or two requests, usually under 1 s; about 100 characters per day.
    """
    settings = settings_of(ctx.services, PublicDataSettings)
    if city is not None and (latitude is not None or longitude is not None):
        raise ToolError(
            "get_weather got both city and coordinates. Pass a city, or latitude and "
            "longitude, not both."
        )
    if city is None:
        if latitude is None or longitude is None:
            raise ToolError(
                "get_weather needs a place: pass city (e.g. 'Berlin'), or both latitude and "
                "longitude (e.g. 52.52 and 13.41)."
            )
        place = f"{latitude:.4f}, {longitude:.4f}"
    else:
        place, latitude, longitude = await _geocode(ctx.services, settings, city)
    response = await fetch(
        settings,
        "get_weather",
        "Open-Meteo",
        settings.open_meteo_forecast_url,
        params={
            "latitude": latitude,
            "longitude": longitude,
            "current": _CURRENT,
            "daily": _DAILY,
            "timezone": "auto",
            "forecast_days": days,
        },
        services=ctx.services,
    )
    if response.status_code == 400:
        reason = _reason(response)
        raise ToolError(
            f"Open-Meteo refused the forecast request: {reason}. Check the coordinates and days."
        )
    check_status(response, "Open-Meteo")
    data = json_body(response, "Open-Meteo")
    try:
        current = data["current"]
        daily = data["daily"]
        now = {
            "time": current["time"],
            "temperature_c": current["temperature_2m"],
            "humidity_percent": current.get("relative_humidity_2m"),
            "wind_kmh": current.get("wind_speed_10m"),
            "conditions": _conditions(current.get("weather_code")),
        }
        forecast = [
            {
                "date": day,
                "conditions": _conditions(daily["weather_code"][i]),
                "min_c": daily["temperature_2m_min"][i],
                "max_c": daily["temperature_2m_max"][i],
                "precipitation_mm": daily["precipitation_sum"][i],
                "precipitation_chance": daily.get("precipitation_probability_max", [None] * 99)[i],
            }
            for i, day in enumerate(daily["time"])
        ]
    except (KeyError, IndexError, TypeError) as exc:
        raise ToolError(
            f"Open-Meteo's answer lacks the expected field {exc}; its format may have changed. "
            "Try again later."
        ) from exc
    timezone = data.get("timezone", "UTC")
    lines = [
        f"Weather for {place} (time zone {timezone})",
        f"Now ({now['time']}): {now['conditions']}, {now['temperature_c']} °C, humidity "
        f"{now['humidity_percent']}%, wind {now['wind_kmh']} km/h",
    ]
    for day in forecast:
        chance = day["precipitation_chance"]
        lines.append(
            f"{day['date']}: {day['conditions']}, {day['min_c']}–{day['max_c']} °C, "
            f"{day['precipitation_mm']} mm" + (f" ({chance}% chance)" if chance is not None else "")
        )
    structured = {
        "place": place,
        "latitude": latitude,
        "longitude": longitude,
        "timezone": timezone,
        "current": now,
        "daily": forecast,
    }
    return ToolResult("\n".join(lines), structured=structured)


async def _geocode(
    services: Services, settings: PublicDataSettings, city: str
) -> tuple[str, float, float]:
    name, _, country = (part.strip() for part in city.partition(","))
    response = await fetch(
        settings,
        "get_weather",
        "Open-Meteo geocoding",
        settings.open_meteo_geocoding_url,
        params={"name": name, "count": 10, "language": "en", "format": "json"},
        services=services,
    )
    check_status(response, "Open-Meteo geocoding")
    results = json_body(response, "Open-Meteo geocoding").get("results") or []
    if country:
        wanted = country.casefold()
        results = [
            r
            for r in results
            if wanted
            in (str(r.get("country", "")).casefold(), str(r.get("country_code", "")).casefold())
        ]
    if not results:
        where = f" in {country!r}" if country else ""
        raise ToolError(
            f"No place called {name!r}{where} is known to Open-Meteo's geocoder. Check the "
            "spelling, try the English or local name, or pass latitude and longitude."
        )
    best = results[0]
    parts = [best.get("name", name), best.get("admin1"), best.get("country")]
    label = ", ".join(str(p) for p in parts if p)
    return label, float(best["latitude"]), float(best["longitude"])


def _conditions(code: object) -> str:
    if isinstance(code, int):
        return _WEATHER_CODES.get(code, f"weather code {code}")
    return "unknown conditions"


def _reason(response: Any) -> str:
    try:
        return str(response.json().get("reason", response.text))
    except ValueError:
        return str(response.text)[:200]
