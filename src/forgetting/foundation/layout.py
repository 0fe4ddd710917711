"""Where every output lives under the results directory.

::

    results/
      plan/runs.parquet                          the run table
      runs/{agent}/{configuration}/{task}/{repeat}/
          run.json        outcome and provenance (written last: its presence marks a finished run)
          calls.jsonl     the proxy's call log
          trajectory.json the agent's own trajectory
          patch.diff      the submitted patch (may be empty)
          eval.json       the evaluation report
          eval/           the evaluation's files: patch, scripts, test log (test_output.txt)
      batches/{agent}/{configuration}/{batch}/   per-batch manifests and analysis tables
      datasets/{runs,calls,tool_calls,run_costs,timings}.parquet
      stats/  tables/  figures/  report/  report.html
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUN_JSON = "run.json"
CALLS = "calls.jsonl"
TRAJECTORY = "trajectory.json"
PATCH = "patch.diff"
EVAL_JSON = "eval.json"
EVAL_DIR = "eval"
AGENT_LOG = "agent.log"
#: what the evaluation and the analysis write in a batch's directory beside its runs.json: they
#: describe the batch's runs as they were, so a batch that changes a run removes them first
BATCH_DOWNSTREAM = ("eval.json", "summary.parquet", "calls.parquet", "tool_calls.parquet", "run_costs.parquet",
                    "timings.parquet")

#: a stage's files as the workflow hands them over: a list of paths, or a rule's named files
Files = Sequence[str | os.PathLike[str]] | Mapping[str, str | os.PathLike[str]]


class _Under:
    """A path under the results directory, read as an attribute of a :class:`Layout`."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, layout: Any, owner: Any = None) -> Path:
        return Path(layout.results).joinpath(*self.parts)


@dataclass(frozen=True)
class Layout:
    results: Path

    plan_table = _Under("plan", "runs.parquet")
    datasets = _Under("datasets")
    stats = _Under("stats")
    tables = _Under("tables")
    figures = _Under("figures")
    report = _Under("report")
    #: Snakemake's HTML report, where the docs and scripts/demo put it (``--report``)
    report_html = _Under("report.html")

    def run_dir(self, run_id: str) -> Path:
        return self.results / "runs" / run_id

    def batch_dir(self, batch_key: str) -> Path:
        return self.results / "batches" / batch_key

    def dataset(self, name: str) -> Path:
        return self.datasets / f"{name}.parquet"

    def study_downstream(self) -> tuple[Path, ...]:
        """What the study makes from its batches — the collected datasets, statistics, tables,
        figures and report: they describe every batch's runs as they were, so a batch that
        changes a run removes them first (and the workflow, whose targets they are, makes them
        again)."""
        return (self.datasets, self.stats, self.tables, self.figures, self.report, self.report_html)


def output_files(
    directory: str | os.PathLike[str], names: Iterable[str], formats: Iterable[str]
) -> dict[str, dict[str, Path]]:
    """Output name → format → ``directory/{name}.{format}`` (the tables', the figures')."""
    d, formats = Path(directory), tuple(formats)
    return {name: {fmt: d / f"{name}.{fmt}" for fmt in formats} for name in names}


def select_outputs(
    every: Mapping[str, Mapping[str, Path]],
    outputs: Files | None,
    what: str,
) -> tuple[list[Path], dict[str, list[Path]]]:
    """The output files asked for — ``outputs`` (paths named ``{name}.{format}``: a list, or the
    values of a mapping), by default all of ``every`` (:func:`output_files`) — and the same by
    name. A path of no name in ``every`` is a ValueError naming it and the ``what`` it is not."""
    if outputs is None:
        wanted = [p for formats in every.values() for p in formats.values()]
    else:
        wanted = [Path(p) for p in (outputs.values() if isinstance(outputs, Mapping) else outputs)]
    by_name: dict[str, list[Path]] = {}
    for p in wanted:
        name = p.name.rsplit(".", 1)[0]
        if name not in every:
            raise ValueError(f"{p}: not a {what} of this pipeline ({', '.join(every)})")
        by_name.setdefault(name, []).append(p)
    return wanted, by_name
