"""A tiny shopping cart."""

from shopcart.cart import Cart, Item
from shopcart.money import format_amount, round_cents, split_evenly

__all__ = ["Cart", "Item", "format_amount", "round_cents", "split_evenly"]
