"""Money helpers: amounts are floats in the currency's main unit, rounded to cents."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def round_cents(value: float) -> float:
    """Round ``value`` to whole cents, halves away from zero."""
    return int(value * 100) / 100


def format_amount(value: float, currency: str = "EUR") -> str:
    """``value`` as text with two decimals and the currency code."""
    return f"{round_cents(value):.2f} {currency}"


def split_evenly(total: float, parts: int) -> list[float]:
    """Split ``total`` into ``parts`` amounts that add up to it, the first ones
    taking any remaining cent."""
    if parts < 1:
        raise ValueError("parts must be at least 1")
    cents = int(Decimal(str(total)).quantize(CENT, rounding=ROUND_HALF_UP) * 100)
    base, rest = divmod(cents, parts)
    return [(base + (1 if i < rest else 0)) / 100 for i in range(parts)]
