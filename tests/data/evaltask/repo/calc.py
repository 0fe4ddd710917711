"""A tiny calculator: the repository of the evaluation tests' fixture task."""


def add(a, b):
    return a + b


def mean(values):
    """The arithmetic mean of a non-empty sequence of numbers."""
    return sum(values) // len(values)
