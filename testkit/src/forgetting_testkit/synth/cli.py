"""``forgetting-synth CONFIG --out DIR``: a synthetic study of CONFIG's plan, for benchmarks and tests.

Every planned run (9,400 for config/config.yaml) is written in the exact on-disk format of a
real run — call log with token ids of the prompts after the real deletion engine, the
agent's trajectory, patch, evaluation report, run record — by a probabilistic stand-in for
agent and model (testkit/src/forgetting_testkit/synth). Runs say ``model_backend: synthetic``; the study's
config (DIR/study.yaml) says ``study.synthetic: true``. Never written into a real study's
results. Rerunning keeps the runs already generated. Analyse it with

    snakemake --cores 2 --configfile DIR/study.yaml --config regenerate=true
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from forgetting.cli import exit_status


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="forgetting-synth",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", help="study config whose plan to generate (e.g. config/config.yaml)")
    p.add_argument("--out", required=True, help="directory of the synthetic study (new, empty, or an earlier synth)")
    p.add_argument("--runs", type=int, help="at most this many runs: fewer tasks, then fewer configurations")
    p.add_argument("--seed", type=int, help="generator seed (default: the study seed)")
    p.add_argument("--workers", type=int, default=2, help="processes generating runs (default 2)")
    return p


def run(args: argparse.Namespace) -> int:
    from forgetting_testkit.synth import synthesize

    report = synthesize(args.config, args.out, runs=args.runs, seed=args.seed, workers=max(1, args.workers))
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.statuses.items()))
    print(
        f"{report.planned} runs in {report.out} ({report.generated} generated, {report.kept} kept; {statuses}; "
        f"{report.resolved} resolved); {report.bytes / 1e9:.2f} GB on disk; {report.seconds:.1f} s"
    )
    print(f"analyse: snakemake --cores 2 --configfile {report.out}/study.yaml --config regenerate=true")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``forgetting-synth`` console script: bad input is one ``error:`` line, status 2."""
    args = build_parser().parse_args(argv)
    return exit_status(lambda: run(args))
