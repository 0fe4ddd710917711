"""Errors a user can act on.

Every problem with the user's input (config, resources, run outputs) is raised as a
:class:`UserError` whose message is one line naming the file or key at fault and, where
possible, what to do next. The command line prints it as ``error: <message>`` and exits
with status 2, without a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input, reported as one line."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # one line, always: a multi-line message would hide the key at fault in a log
        super().__init__(" ".join(message.split()))


class ConfigError(UserError):
    """A bad value in a study config file."""


class ResourceError(UserError):
    """A missing or malformed resource file (task list, price sheet, dataset, demo task)."""


class RunOutputError(UserError):
    """A run's stored output (call log, trajectory, report) cannot be read."""
