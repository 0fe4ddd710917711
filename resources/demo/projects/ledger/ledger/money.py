"""Amounts of money: a :class:`~decimal.Decimal` and a currency code.

Amounts are never floats. :func:`parse_amount` reads the notations people type into a
journal; :meth:`Money.rounded` rounds to the currency's minor unit (cents for EUR, none for
JPY, fils for BHD); :func:`allocate` splits an amount by weights without creating or losing
a minor unit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, InvalidOperation

__all__ = [
    "MINOR_UNITS",
    "AmountError",
    "Money",
    "allocate",
    "format_amount",
    "parse_amount",
]

#: digits after the decimal point of each currency's minor unit (ISO 4217); others get 2
MINOR_UNITS: dict[str, int] = {
    "EUR": 2,
    "USD": 2,
    "GBP": 2,
    "CHF": 2,
    "SEK": 2,
    "JPY": 0,
    "KRW": 0,
    "BHD": 3,
    "KWD": 3,
}

#: currency symbols accepted in front of a number
SYMBOLS: dict[str, str] = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}

_CODE = re.compile(r"[A-Z]{3}")
#: "1234.5", "1,234.50", ".5": commas group thousands, a dot starts the fraction
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+")
#: "12,50", "1.234,50": a comma starts a fraction of one or two digits, dots group thousands
_DECIMAL_COMMA = re.compile(r"\d{1,3}(?:\.\d{3})+,\d+|\d+,\d{1,2}")


class AmountError(ValueError):
    """Text that is not an amount, or arithmetic between different currencies."""


def minor_unit(currency: str) -> int:
    """Decimal places of the currency's minor unit."""
    return MINOR_UNITS.get(currency, 2)


@dataclass(frozen=True)
class Money:
    """An amount in one currency. Arithmetic between currencies raises :class:`AmountError`."""

    amount: Decimal
    currency: str

    def __post_init__(self) -> None:
        if not isinstance(self.amount, Decimal):
            object.__setattr__(self, "amount", Decimal(str(self.amount)))
        if not _CODE.fullmatch(self.currency):
            raise AmountError(f"currency must be a three-letter code, not {self.currency!r}")

    @classmethod
    def zero(cls, currency: str) -> Money:
        return cls(Decimal(0), currency)

    def _check(self, other: Money) -> None:
        if other.currency != self.currency:
            raise AmountError(f"cannot combine {self.currency} and {other.currency}")

    def __add__(self, other: object) -> Money:
        if not isinstance(other, Money):
            return NotImplemented
        self._check(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other: object) -> Money:
        if not isinstance(other, Money):
            return NotImplemented
        self._check(other)
        return Money(self.amount - other.amount, self.currency)

    def __neg__(self) -> Money:
        return Money(-self.amount, self.currency)

    def __mul__(self, factor: object) -> Money:
        if isinstance(factor, (int, Decimal)) and not isinstance(factor, bool):
            return Money(self.amount * factor, self.currency)
        return NotImplemented

    __rmul__ = __mul__

    def is_zero(self) -> bool:
        return self.amount == 0

    def rounded(self) -> Money:
        """Rounded to the minor unit, half to even (banker's rounding)."""
        exponent = Decimal(1).scaleb(-minor_unit(self.currency))
        return Money(self.amount.quantize(exponent, rounding=ROUND_HALF_EVEN), self.currency)

    def __str__(self) -> str:
        return format_amount(self)


def _parse_number(text: str) -> Decimal:
    """A signed number with grouping: ``-1,234.50``, ``(12.00)``, ``12,50``."""
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text = True, text[1:-1].strip()
    if text[:1] in ("-", "+"):
        if text[0] == "-":
            negative = not negative
        text = text[1:].lstrip()
    if _DECIMAL_COMMA.fullmatch(text):
        digits = text.replace(".", "").replace(",", ".")
    elif _GROUPED.fullmatch(text):
        digits = text.replace(",", "")
    else:
        raise AmountError(f"not a number: {text!r}")
    try:
        value = Decimal(digits)
    except InvalidOperation:  # pragma: no cover - the patterns admit only valid decimals
        raise AmountError(f"not a number: {text!r}") from None
    return -value if negative else value


def parse_amount(text: str, default_currency: str | None = None) -> Money:
    """An amount as written in a journal.

    The currency is a three-letter code before or after the number (``"EUR 12"``,
    ``"12 EUR"``) or a symbol in front (``"$12"``, ``"-€3"``); without one,
    ``default_currency`` is used. Negative amounts have a ``-`` or parentheses. In the
    number, commas group thousands and a dot starts the fraction (``"1,234.50"``); a comma
    followed by one or two digits is a decimal comma (``"12,50"``, ``"1.234,50"``).

    >>> parse_amount("1,234.50 EUR")
    Money(amount=Decimal('1234.50'), currency='EUR')
    >>> parse_amount("(12)", "USD").amount
    Decimal('-12')
    """
    source = text
    text = text.strip()
    currency = None
    parts = text.split()
    if len(parts) == 2 and _CODE.fullmatch(parts[1]):
        text, currency = parts[0], parts[1]
    elif len(parts) == 2 and _CODE.fullmatch(parts[0]):
        currency, text = parts[0], parts[1]
    elif len(parts) != 1:
        raise AmountError(f"not an amount: {source!r}")
    sign = ""
    if text[:1] in ("-", "+"):
        sign, text = text[0], text[1:]
    if text[:1] in SYMBOLS:
        if currency is not None:
            raise AmountError(f"two currencies in {source!r}")
        currency, text = SYMBOLS[text[0]], text[1:]
    currency = currency or default_currency
    if currency is None:
        raise AmountError(f"no currency in {source!r} and no default currency")
    try:
        number = _parse_number(sign + text)
    except AmountError:
        raise AmountError(f"not an amount: {source!r}") from None
    return Money(number, currency)


def format_amount(money: Money, *, grouping: bool = True) -> str:
    """``"1,234.50 EUR"``: rounded to the minor unit, commas between thousands."""
    places = minor_unit(money.currency)
    value = money.rounded().amount
    text = f"{value:,.{places}f}" if grouping else f"{value:.{places}f}"
    return f"{text} {money.currency}"


def allocate(total: Money, weights: Sequence[int | Decimal]) -> list[Money]:
    """Split ``total`` in proportion to ``weights``, in whole minor units that sum to it.

    Every share is first rounded down; the minor units left over go one each to the
    shares with the largest remainders (earlier shares first on ties).

    >>> [str(m) for m in allocate(Money(Decimal("100"), "EUR"), [1, 1, 1])]
    ['33.34 EUR', '33.33 EUR', '33.33 EUR']
    """
    if not weights:
        raise ValueError("allocate needs at least one weight")
    if any(w < 0 for w in weights) or sum(weights) == 0:
        raise ValueError("weights must be non-negative and not all zero")
    unit = Decimal(1).scaleb(-minor_unit(total.currency))
    cents = int((total.rounded().amount / unit).to_integral_value())
    weight_sum = Decimal(sum(weights))
    exact = [Decimal(cents) * Decimal(w) / weight_sum for w in weights]
    shares = [int(e.to_integral_value(rounding=ROUND_FLOOR)) for e in exact]
    left = cents - sum(shares)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[:left]:
        shares[i] += 1
    return [Money(Decimal(s) * unit, total.currency) for s in shares]
