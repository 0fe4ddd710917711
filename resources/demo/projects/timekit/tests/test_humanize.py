from datetime import datetime, timedelta, timezone

import pytest

from timekit import naturaldelta, naturaltime, precisedelta

NOW = datetime(2024, 5, 17, 12, 0, 0)


def test_naturaldelta_picks_one_rounded_unit():
    assert naturaldelta(1) == "1 second"
    assert naturaldelta(42) == "42 seconds"
    assert naturaldelta(95) == "2 minutes"
    assert naturaldelta("36h") == "2 days"
    assert naturaldelta("3w") == "3 weeks"


def test_naturaldelta_ignores_sign_and_names_tiny_durations():
    assert naturaldelta(-120) == "2 minutes"
    assert naturaldelta(0.2) == "a moment"


def test_naturaldelta_rounding_up_moves_to_the_next_unit():
    assert naturaldelta(59.6) == "1 minute"
    assert naturaldelta(3599.6) == "1 hour"
    assert naturaldelta("23h59m50s") == "1 day"
    assert naturaldelta("6d 23h") == "1 week"


def test_naturaldelta_just_below_a_boundary():
    assert naturaldelta(59.4) == "59 seconds"
    assert naturaldelta("59m20s") == "59 minutes"


def test_precisedelta():
    assert precisedelta(3725) == "1 hour, 2 minutes and 5 seconds"
    assert precisedelta("1d 3h 20m", smallest="h") == "1 day and 3 hours"
    assert precisedelta(0) == "0 seconds"
    assert precisedelta("2w") == "2 weeks"


def test_precisedelta_rounds_the_smallest_unit():
    assert precisedelta(119.6) == "2 minutes"
    assert precisedelta("1h 29m 40s", smallest="min") == "1 hour and 30 minutes"


def test_naturaltime_past_within_a_day():
    assert naturaltime(NOW - timedelta(minutes=3), now=NOW) == "3 minutes ago"
    assert naturaltime(NOW - timedelta(hours=5, minutes=10), now=NOW) == "5 hours ago"
    assert naturaltime(NOW - timedelta(milliseconds=300), now=NOW) == "just now"


def test_naturaltime_days_ago():
    assert naturaltime(NOW - timedelta(days=2), now=NOW) == "2 days ago"
    assert naturaltime(NOW - timedelta(days=15), now=NOW) == "2 weeks ago"


def test_naturaltime_future():
    assert naturaltime(NOW + timedelta(minutes=2), now=NOW) == "in 2 minutes"
    assert naturaltime(NOW + timedelta(hours=2), now=NOW) == "in 2 hours"
    assert naturaltime(NOW + timedelta(days=3), now=NOW) == "in 3 days"


def test_naturaltime_aware_datetimes_and_mixing():
    aware = datetime(2024, 5, 17, 12, 0, tzinfo=timezone.utc)
    assert naturaltime(aware - timedelta(seconds=30), now=aware) == "30 seconds ago"
    with pytest.raises(ValueError, match="naive and an aware"):
        naturaltime(NOW, now=aware)
