from datetime import timedelta

import pytest

from timekit import Duration, DurationError, format_clock, format_duration, format_iso, parse_duration
from timekit.durations import sum_durations


def test_bare_numbers_are_seconds():
    assert parse_duration("90") == Duration(90)
    assert parse_duration("1.5") == Duration(1.5)
    assert parse_duration(42) == Duration(42)


def test_compact_notation():
    assert parse_duration("1h30m") == Duration(5400)
    assert parse_duration("2d 4h") == Duration(2 * 86400 + 4 * 3600)
    assert parse_duration("250ms") == Duration(0.25)
    assert parse_duration("1.5 hours") == Duration(5400)


def test_compact_notation_rejects_repeated_and_unknown_units():
    with pytest.raises(DurationError, match="twice"):
        parse_duration("1h 2h")
    with pytest.raises(DurationError, match="fortnight"):
        parse_duration("3 fortnight")


def test_clock_minutes_and_seconds():
    assert parse_duration("05:07") == Duration(307)
    assert parse_duration("0:45.5") == Duration(45.5)


def test_clock_with_hours():
    assert parse_duration("1:30:00") == Duration(5400)
    assert parse_duration("0:00:01.250") == Duration(1.25)
    assert parse_duration("27:00:05") == Duration(27 * 3600 + 5)


def test_clock_with_hours_round_trips_through_format_clock():
    for seconds in (3600, 5400, 86399, 90061.5):
        text = format_clock(seconds, precision=1)
        assert parse_duration(text) == Duration(seconds), text


def test_clock_fields_must_stay_below_sixty():
    with pytest.raises(DurationError, match="seconds field"):
        parse_duration("1:75")
    with pytest.raises(DurationError, match="minutes field"):
        parse_duration("1:75:00")


def test_iso_notation():
    assert parse_duration("PT1H30M") == Duration(5400)
    assert parse_duration("P2DT3H") == Duration(2 * 86400 + 3 * 3600)
    assert parse_duration("P1W") == Duration(7 * 86400)
    assert parse_duration("pt0,5s") == Duration(0.5)


def test_iso_notation_rejects_years_empty_parts_and_inner_fractions():
    for text in ("P1Y", "P", "PT", "P1DT", "PT1.5H30M"):
        with pytest.raises(DurationError):
            parse_duration(text)


def test_sign_applies_to_the_whole_duration():
    assert parse_duration("-1h30m") == Duration(-5400)
    assert parse_duration("- 0:01:30") == Duration(-90)
    assert parse_duration("+PT2M") == Duration(120)


def test_garbage_is_rejected_with_the_input_in_the_message():
    for text in ("", "-", "abc", "1h30", "1::2"):
        with pytest.raises(DurationError):
            parse_duration(text)
    with pytest.raises(DurationError, match="'soon'"):
        parse_duration("soon")


def test_from_timedelta_keeps_microseconds():
    assert Duration.from_timedelta(timedelta(milliseconds=1500)) == Duration(1.5)
    assert Duration.from_timedelta(timedelta(microseconds=250)).seconds == pytest.approx(0.00025)
    assert parse_duration(timedelta(days=1, seconds=1, microseconds=500_000)) == Duration(86401.5)


def test_from_timedelta_round_trips():
    for seconds in (0.001, 59.999, 3600.25, -1.5):
        assert Duration.from_timedelta(Duration(seconds).to_timedelta()).seconds == pytest.approx(seconds)


def test_whole_timedeltas():
    assert Duration.from_timedelta(timedelta(hours=2)) == Duration(7200)
    assert Duration.from_timedelta(timedelta(days=-1)) == Duration(-86400)


def test_arithmetic():
    a, b = Duration(90), Duration(30)
    assert a + b == Duration(120)
    assert a - b == Duration(60)
    assert 2 * a == a * 2 == Duration(180)
    assert a / 3 == Duration(30)
    assert a / b == 3
    assert -a == Duration(-90)
    assert abs(Duration(-5)) == Duration(5)
    assert not Duration(0)
    with pytest.raises(ZeroDivisionError):
        a / Duration(0)


def test_unit_properties():
    d = parse_duration("1d 12h")
    assert d.days == 1.5
    assert d.hours == 36
    assert Duration(0.25).milliseconds == 250
    assert Duration.of(3, "min").minutes == 3


def test_duration_rejects_non_numbers_and_infinity():
    with pytest.raises(TypeError):
        Duration("5")  # type: ignore[arg-type]
    with pytest.raises(DurationError):
        Duration(float("inf"))


def test_sum_durations_mixes_notations():
    assert sum_durations(["1h", "0:30:00", "PT15M", 900, timedelta(minutes=15)]) == Duration(8100)


def test_format_duration():
    assert format_duration(5400) == "1h30m"
    assert format_duration(0) == "0s"
    assert format_duration(45.5, precision=1) == "45.5s"
    assert format_duration(Duration(90061), largest="h") == "25h1m1s"
    assert format_duration(-90) == "-1m30s"
    assert str(Duration(2 * 86400 + 0.25)) == "2d0.25s"


def test_format_clock_and_iso():
    assert format_clock(5400) == "1:30:00"
    assert format_clock(97205.5, precision=1) == "27:00:05.5"
    assert format_clock(-61) == "-0:01:01"
    assert format_iso(93784) == "P1DT2H3M4S"
    assert format_iso(0) == "PT0S"
    assert format_iso(86400) == "P1D"
    assert format_iso(1.5) == "PT1.5S"


def test_compact_and_iso_round_trips():
    for seconds in (1, 59, 61, 3600, 86399, 93784, 1_000_000):
        assert parse_duration(format_duration(seconds)) == Duration(seconds)
        assert parse_duration(format_iso(seconds)) == Duration(seconds)
