"""The ``forgetting`` command line: one subcommand per stage of the pipeline.

Each subcommand lives in :mod:`forgetting.commands` as a module with ``add_parser(sub)``
and ``run(args) -> int``. A command module imports at its top only what ``--help`` needs (the
standard library and a few light modules: errors, atomic, layout, its shared arguments) and the
pipeline inside ``run``, so ``--help`` stays fast (tests/test_imports.py).
A :class:`~forgetting.foundation.errors.UserError` is printed as one line and exits with status 2, and
so is a bad argument (after the usage line) and an :class:`OSError` on a path the user
named — an argument, or the results directory of the study the arguments name (a
directory where a file should go, a missing parent, no permission): ``error: PATH: why``.
Any other exception is a bug and is not hidden.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from forgetting import __version__
from forgetting.foundation.atomic import is_disk_full
from forgetting.foundation.errors import UserError

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


class Parser(argparse.ArgumentParser):
    """argparse, with its error as the one ``error:`` line every failure of the command line
    prints (after the usage line)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {self.prog}: {' '.join(message.split())}\n")


def named_paths(args: argparse.Namespace) -> list[Path]:
    """The paths the arguments name: every string argument (a path or not: only an error on
    that path, below it, above it, or on an atomic write's temporary file beside it counts),
    and the results directories of the studies loaded from them (``args.named_paths``)."""
    values: list[object] = []
    for key, value in vars(args).items():
        if key == "func":
            continue
        values.extend(value if isinstance(value, list | tuple) else [value])
    return [Path(os.path.abspath(v)) for v in values if isinstance(v, str | os.PathLike) and v and "\0" not in str(v)]


def _user_path(exc: OSError, named: Iterable[Path]) -> str | None:
    """The path of ``exc`` when it is one the user named (see :func:`named_paths`), else None."""
    named = list(named)
    for raw in (exc.filename2, exc.filename):  # a failed rename: filename2 is the target
        if raw is None or isinstance(raw, int):
            continue
        path = Path(os.path.abspath(os.fsdecode(raw)))
        for n in named:
            if path == n or n in path.parents or path in n.parents:
                return str(path)
            if path.parent == n.parent and path.name.startswith(f".{n.name}."):  # forgetting.foundation.atomic's
                return str(n)
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="forgetting",
        description="Trajectory deletion in software-engineering LLM agents: plan, run, evaluate, analyse.",
    )
    parser.add_argument("--version", action="version", version=f"forgetting {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"forgetting.commands.{name.replace('-', '_')}")
        module.add_parser(sub)
    return parser


def exit_status(command: Callable[[], int | None], args: argparse.Namespace | None = None) -> int:
    """Carry out a command: its exit status, a :class:`~forgetting.foundation.errors.UserError` as one
    ``error:`` line and its status (2), an interrupt as 130, a closed pipe (``| head``) as 0,
    an :class:`OSError` on a path ``args`` names (:func:`named_paths`), or a full disk
    anywhere (:func:`forgetting.foundation.atomic.is_disk_full`), as one ``error:`` line and status 2."""
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
    except OSError as exc:
        if is_disk_full(exc):  # wherever it is, a full disk is no bug
            print(f"error: {exc.filename or 'a write'}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        path = None if args is None else _user_path(exc, named_paths(args))
        if path is None:
            raise
        print(f"error: {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return exit_status(lambda: args.func(args), args)


if __name__ == "__main__":
    raise SystemExit(main())
