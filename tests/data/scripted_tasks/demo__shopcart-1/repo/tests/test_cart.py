import pytest
from shopcart import Cart, format_amount, round_cents, split_evenly


def test_subtotal_and_count():
    cart = Cart()
    cart.add("pen", 1.5, qty=2)
    cart.add("pad", 3.25)
    assert cart.subtotal() == pytest.approx(6.25)
    assert cart.count() == 3


def test_total_without_discount():
    cart = Cart()
    cart.add("book", 19.99)
    assert cart.total() == 19.99


def test_percentage_discount():
    cart = Cart(discount_percent=10)
    cart.add("book", 19.99)
    assert cart.total() == 17.99


def test_round_half_cent_up():
    assert round_cents(2.675) == 2.68
    assert round_cents(-1.005) == -1.01


def test_format_and_split():
    assert format_amount(3.5) == "3.50 EUR"
    assert split_evenly(10, 3) == [3.34, 3.33, 3.33]
