import pytest

from confkit.coerce import CoercionError, coerce, to_bool, to_float, to_int, to_list, to_size


def test_to_bool_words():
    for word in ("true", "Yes", " ON ", "1", "y", "T"):
        assert to_bool(word) is True
    for word in ("false", "No", "off", "0", "", "n"):
        assert to_bool(word) is False
    assert to_bool(True) is True
    assert to_bool(0) is False


def test_to_bool_rejects_other_words():
    with pytest.raises(CoercionError, match="'maybe'"):
        to_bool("maybe")
    with pytest.raises(CoercionError):
        to_bool(2)


def test_to_int():
    assert to_int("42") == 42
    assert to_int(" -7 ") == -7
    assert to_int("1_000") == 1000
    assert to_int("0x1F") == 31
    assert to_int(3.0) == 3
    for bad in ("4.5", "ten", True, 2.5):
        with pytest.raises(CoercionError):
            to_int(bad)


def test_to_float():
    assert to_float("2.5") == 2.5
    assert to_float("1_000.5") == 1000.5
    assert to_float(3) == 3.0
    with pytest.raises(CoercionError):
        to_float("x")


def test_to_list():
    assert to_list(" a, b,,c ") == ["a", "b", "c"]
    assert to_list("a;b", separator=";") == ["a", "b"]
    assert to_list(["x", 1]) == ["x", "1"]
    assert to_list("") == []


def test_to_size_decimal_and_binary_units():
    assert to_size("512") == 512
    assert to_size("10kb") == 10_000
    assert to_size("64 MiB") == 64 * 1024**2
    assert to_size("1.5GiB") == 3 * 512 * 1024**2
    assert to_size("2K") == 2000
    assert to_size(100) == 100


def test_to_size_rejects_fractions_of_bytes_and_unknown_units():
    with pytest.raises(CoercionError, match="whole number"):
        to_size("1.5")
    with pytest.raises(CoercionError):
        to_size("3 parsecs")


def test_coerce_by_name_type_or_callable():
    assert coerce("3", "int") == 3
    assert coerce("on", bool) is True
    assert coerce("x", str.upper) == "X"
    with pytest.raises(ValueError, match="unknown kind"):
        coerce("1", "decimal")
