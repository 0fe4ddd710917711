"""The ``forgetting`` command line: one subcommand per stage of the pipeline.

Each subcommand lives in :mod:`forgetting.commands` as a module with ``add_parser(sub)``
and ``run(args) -> int``. A command module imports at its top only what ``--help`` needs (the
standard library and a few light modules: errors, atomic, layout, its shared arguments) and the
pipeline inside ``run``, so ``--help`` stays fast (tests/test_imports.py).
A :class:`~forgetting.errors.UserError` is printed as one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from forgetting import __version__
from forgetting.errors import UserError

#: subcommand modules under forgetting.commands, in the order --help lists them
COMMANDS: tuple[str, ...] = (
    "plan",
    "preflight",
    "tasks",
    "dataset",
    "run",
    "run-batch",
    "evaluate",
    "label",
    "cost",
    "demo",
    "collect",
    "report",
    "proxy",
    "scripted-model",
    "serve",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forgetting",
        description="Trajectory deletion in software-engineering LLM agents: plan, run, evaluate, analyse.",
    )
    parser.add_argument("--version", action="version", version=f"forgetting {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"forgetting.commands.{name.replace('-', '_')}")
        module.add_parser(sub)
    return parser


def exit_status(command: Callable[[], int | None]) -> int:
    """Carry out a command: its exit status, a :class:`~forgetting.errors.UserError` as one
    ``error:`` line and its status (2), an interrupt as 130, a closed pipe (``| head``) as 0."""
    try:
        return int(command() or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return exit_status(lambda: args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
