"""timekit: parse, convert and humanize durations."""

from timekit.durations import (
    Duration,
    DurationError,
    format_clock,
    format_duration,
    format_iso,
    parse_duration,
)
from timekit.humanize import naturaldelta, naturaltime, precisedelta
from timekit.units import UnknownUnitError, convert

__version__ = "0.4.1"

__all__ = [
    "Duration",
    "DurationError",
    "UnknownUnitError",
    "convert",
    "format_clock",
    "format_duration",
    "format_iso",
    "naturaldelta",
    "naturaltime",
    "parse_duration",
    "precisedelta",
]
