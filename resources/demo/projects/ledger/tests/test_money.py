from decimal import Decimal

import pytest

from ledger.money import AmountError, Money, allocate, format_amount, parse_amount


def eur(text: str) -> Money:
    return Money(Decimal(text), "EUR")


def test_code_after_or_before_the_number():
    assert parse_amount("12.50 EUR") == eur("12.50")
    assert parse_amount("EUR 12.50") == eur("12.50")


def test_symbols_and_default_currency():
    assert parse_amount("$3.20") == Money(Decimal("3.20"), "USD")
    assert parse_amount("-€3") == eur("-3")
    assert parse_amount("7", "GBP") == Money(Decimal("7"), "GBP")


def test_negative_amounts():
    assert parse_amount("-12.00 EUR") == eur("-12.00")
    assert parse_amount("(12.00) EUR") == eur("-12.00")
    assert parse_amount("(-5)", "EUR") == eur("5")


def test_comma_groups_thousands():
    assert parse_amount("1,234.50 EUR") == eur("1234.50")
    assert parse_amount("12,345,678.9 EUR") == eur("12345678.9")


def test_comma_groups_thousands_without_a_fraction():
    assert parse_amount("1,250 EUR") == eur("1250")
    assert parse_amount("-2,000,000", "EUR") == eur("-2000000")
    assert parse_amount("(1,000) EUR") == eur("-1000")


def test_decimal_comma():
    assert parse_amount("12,50 EUR") == eur("12.50")
    assert parse_amount("1.234,5 EUR") == eur("1234.5")
    assert parse_amount("0,07", "EUR") == eur("0.07")


def test_rejects_what_is_not_an_amount():
    for text in ("", "EUR", "12 EUR USD", "1,23,4 EUR", "12.50 eur", "$12 USD", "abc"):
        with pytest.raises(AmountError):
            parse_amount(text, "EUR")
    with pytest.raises(AmountError, match="no default currency"):
        parse_amount("12")


def test_arithmetic_stays_in_one_currency():
    assert eur("1.10") + eur("2.20") == eur("3.30")
    assert eur("5") - eur("7.5") == eur("-2.5")
    assert 3 * eur("1.25") == eur("3.75")
    with pytest.raises(AmountError, match="EUR and USD"):
        eur("1") + Money(Decimal("1"), "USD")


def test_rounding_to_the_minor_unit():
    assert eur("2.675").rounded() == eur("2.68")
    assert eur("2.665").rounded() == eur("2.66")
    assert Money(Decimal("1234.5"), "JPY").rounded() == Money(Decimal("1234"), "JPY")
    assert Money(Decimal("0.0005"), "BHD").rounded().amount == Decimal("0.000")


def test_format_amount():
    assert format_amount(eur("1234.5")) == "1,234.50 EUR"
    assert format_amount(eur("-0.125")) == "-0.12 EUR"
    assert format_amount(Money(Decimal("1500000"), "JPY"), grouping=False) == "1500000 JPY"
    assert str(eur("3")) == "3.00 EUR"


def test_allocate_keeps_every_cent():
    shares = allocate(eur("100"), [1, 1, 1])
    assert shares == [eur("33.34"), eur("33.33"), eur("33.33")]
    assert sum((s.amount for s in shares), Decimal(0)) == Decimal("100")


def test_allocate_by_weights_and_currency():
    assert allocate(eur("10"), [3, 1]) == [eur("7.50"), eur("2.50")]
    assert allocate(Money(Decimal("100"), "JPY"), [1, 2]) == [
        Money(Decimal("33"), "JPY"),
        Money(Decimal("67"), "JPY"),
    ]
    with pytest.raises(ValueError):
        allocate(eur("1"), [0, 0])
