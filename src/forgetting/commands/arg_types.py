"""Argument types of the command line's numeric options: a value out of its range is an
argparse error (one ``error:`` line naming the option, status 2) before the command runs."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

#: the largest seed a run carries (seeds are 63-bit, :func:`forgetting.foundation.seeds.seed63`)
MAX_SEED = 2**63 - 1


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer in ``[minimum, maximum]``."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"≥ {minimum}" if maximum is None else f"in {minimum}..{maximum}"
            raise argparse.ArgumentTypeError(f"expected an integer {bounds}, got {text!r}")
        return value

    parse.__name__ = "integer"  # what argparse names in its message
    return parse


def number(minimum: float, maximum: float, *, exclusive_minimum: bool = False) -> Callable[[str], float]:
    """A finite number in ``[minimum, maximum]`` (``(minimum, maximum]`` with
    ``exclusive_minimum``): ``nan``, ``inf`` and ``-inf``, which ``float`` accepts, are refused."""
    bounds = f"{'(' if exclusive_minimum else '['}{minimum:g}, {maximum:g}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number in {bounds}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number in {bounds}, got {text!r}")
        low_ok = value > minimum if exclusive_minimum else value >= minimum
        if not (low_ok and value <= maximum):
            raise argparse.ArgumentTypeError(f"expected a number in {bounds}, got {text!r}")
        return value

    parse.__name__ = "number"  # what argparse names in its message
    return parse


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


port = integer(0, 65535)
seed = integer(0, MAX_SEED)
