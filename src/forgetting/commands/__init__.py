"""Subcommands of the ``forgetting`` command line (see :mod:`forgetting.cli`)."""
