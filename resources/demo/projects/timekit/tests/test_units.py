import pytest

from timekit import units
from timekit.units import UnknownUnitError, canonical_unit, convert, split_seconds, unit_label


def test_canonical_names_are_their_own_canonical_form():
    for name in units.UNIT_SECONDS:
        assert canonical_unit(name) == name


def test_aliases_ignore_case_and_whitespace():
    assert canonical_unit("Minutes") == "min"
    assert canonical_unit(" HRS ") == "h"
    assert canonical_unit("msec") == "ms"
    assert canonical_unit("µs") == canonical_unit("μs") == "us"


def test_unknown_unit_names_the_unit():
    with pytest.raises(UnknownUnitError, match="'fortnight'"):
        canonical_unit("fortnight")


def test_convert_between_units():
    assert convert(90, "min", "h") == 1.5
    assert convert(2, "d", "h") == 48
    assert convert(1500, "ms", "s") == pytest.approx(1.5)
    assert convert(1, "w", "days") == 7


def test_split_seconds_keeps_zero_parts_and_the_fraction():
    assert split_seconds(5430) == [("d", 0), ("h", 1), ("min", 30), ("s", 30.0)]
    assert split_seconds(90.25, ("min", "s")) == [("min", 1), ("s", 30.25)]


def test_split_seconds_rejects_bad_input():
    with pytest.raises(ValueError, match="negative"):
        split_seconds(-1)
    with pytest.raises(ValueError, match="largest"):
        split_seconds(10, ("s", "min"))


def test_unit_label_singular_and_plural():
    assert unit_label("h", 1) == "1 hour"
    assert unit_label("minutes", 2) == "2 minutes"
    assert unit_label("s", 2.5) == "2.5 seconds"
