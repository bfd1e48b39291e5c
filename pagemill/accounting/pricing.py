"""The price of a device second and a page's cost."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pagemill.settings import Settings

# Costs are stored as Numeric(14, 8): fractions of a cent add up over millions of pages.
USD_PRECISION = Decimal("0.00000001")
SECONDS_PER_HOUR = 3600


def price_usd_per_hour(settings: Settings) -> Decimal:
    """What one device-hour of this worker costs, as configured."""
    return Decimal(str(settings.device_price_usd_per_hour))


def cost_usd(device_seconds: float, price_per_hour: Decimal) -> Decimal:
    """Device seconds at an hourly price, to the stored precision."""
    exact = Decimal(str(device_seconds)) * price_per_hour / SECONDS_PER_HOUR
    return exact.quantize(USD_PRECISION)


def page_charge(settings: Settings, device_seconds: float) -> dict[str, Any]:
    """The page row's accounting columns for `device_seconds` at this worker's price.
    The price is kept with the page, so a later price change leaves its cost as charged."""
    price = price_usd_per_hour(settings)
    return {
        "device_kind": settings.device_kind,
        "device_seconds": device_seconds,
        "cost_usd": cost_usd(device_seconds, price),
        "price_usd_per_hour": price,
    }
