"""The arguments every study command shares: the config (with overlays) and ``--set``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from forgetting.foundation.errors import ConfigError
from forgetting.foundation.inputs import parse_yaml

if TYPE_CHECKING:  # a type only: loading a study imports the pipeline, which --help must not
    from forgetting.study.config import Study


def add_study_arguments(p: argparse.ArgumentParser, *, example: str = "config/config.yaml") -> None:
    p.add_argument(
        "config", nargs="+",
        help=f"study config (e.g. {example}), then optional overlays (e.g. config/policies.yaml)",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a top-level key, as snakemake --config does (repeatable)")


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs, values parsed as YAML (so lists and numbers work)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        out[key] = parse_yaml(value, f"--set {key}", error=ConfigError)
    return out


def study_from_args(args: argparse.Namespace, **extra: Any) -> Study:
    """The study the arguments name; ``extra`` overrides on top of ``--set``."""
    from forgetting.study.config import load_study

    return noted(args, load_study(args.config, {**parse_overrides(args.set), **extra}))


def noted(args: argparse.Namespace, study: Study) -> Study:
    """``study``, its results directory and every path its config names noted as paths the
    user named (``args.named_paths``: the command line reports an OSError there as one line,
    :func:`forgetting.cli.main`)."""
    paths = getattr(args, "named_paths", None)
    if paths is None:
        paths = args.named_paths = []
    paths.append(study.results_dir)
    paths.extend(study.config_paths())  # an OSError on a path only the config names: one line too
    return study
