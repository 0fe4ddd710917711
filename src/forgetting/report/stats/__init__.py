"""Paired-bootstrap statistics of a study (SPEC §6); see docs/statistics.md."""
