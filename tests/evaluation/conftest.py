"""Fixtures of the evaluation tests."""

from forgetting_testkit.evaltask import study_file  # noqa: F401  (a demo-kind study of the fixture task)
