"""The cart: items with prices and quantities, an optional percentage discount."""

from __future__ import annotations

from dataclasses import dataclass

from shopcart.money import round_cents


@dataclass
class Item:
    name: str
    price: float
    qty: int = 1

    @property
    def amount(self) -> float:
        return self.price * self.qty


class Cart:
    """A shopping cart.

    ``discount_percent`` is a percentage between 0 and 100 applied to the subtotal.
    """

    def __init__(self, discount_percent: float = 0.0) -> None:
        if not 0 <= discount_percent <= 100:
            raise ValueError("discount_percent must be between 0 and 100")
        self.discount_percent = discount_percent
        self.items: list[Item] = []

    def add(self, name: str, price: float, qty: int = 1) -> Item:
        if price < 0:
            raise ValueError("price must not be negative")
        if qty < 1:
            raise ValueError("qty must be at least 1")
        for item in self.items:
            if item.name == name and item.price == price:
                item.qty += qty
                return item
        item = Item(name, price, qty)
        self.items.append(item)
        return item

    def remove(self, name: str) -> None:
        before = len(self.items)
        self.items = [item for item in self.items if item.name != name]
        if len(self.items) == before:
            raise KeyError(name)

    def count(self) -> int:
        return sum(item.qty for item in self.items)

    def subtotal(self) -> float:
        return sum(item.amount for item in self.items)

    def discount(self) -> float:
        """The amount taken off the subtotal."""
        return self.subtotal() * self.discount_percent

    def total(self) -> float:
        """What the customer pays, rounded to cents."""
        return round_cents(self.subtotal() - self.discount())

    def summary(self) -> str:
        lines = [f"{item.qty} x {item.name} @ {item.price:.2f}" for item in self.items]
        lines.append(f"total: {self.total():.2f}")
        return "\n".join(lines)
