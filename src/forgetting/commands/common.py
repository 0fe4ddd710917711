"""What several command modules share: a subcommand's parser, and the ``--allow-torn`` option
of the commands that read call logs (``cost``, ``label``) with its messages."""

from __future__ import annotations

import argparse
from typing import Any

from forgetting.foundation.errors import UserError


def add_command(sub: Any, name: str, *, help: str, doc: str | None) -> argparse.ArgumentParser:
    """The subcommand ``name``, its module's docstring ``doc`` as the description, printed as
    written (its example command lines keep their line breaks)."""
    return sub.add_parser(name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_allow_torn(p: argparse.ArgumentParser, verb: str) -> None:
    """``--allow-torn``: ``verb`` (price, use) the calls before a torn last line of a call log."""
    p.add_argument(
        "--allow-torn",
        action="store_true",
        help=f"{verb} the calls before a torn last line of a call log instead of stopping (says how many)",
    )


def torn_refusal(exc: Any, what: str) -> UserError:
    """The error for a torn call log, with the way to go on anyway."""
    return UserError(f"{exc}; rerun the run, or give --allow-torn to {what} the {exc.calls} calls before it")


def torn_warning(path: Any, line: int, calls: int, what: str) -> str:
    return f"warning: {path}: the call log is torn at line {line}; {what} the {calls} calls read before it"
