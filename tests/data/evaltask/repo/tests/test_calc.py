from calc import add, mean


def test_add():
    assert add(2, 3) == 5


def test_mean_of_equal_values():
    assert mean([2, 2, 2]) == 2
