"""Redo the evaluations that errored, and nothing else (``forgetting evaluate --errored``).

An evaluation error (``timeout`` or ``error``, :data:`~forgetting.records.eval_report.EVAL_ERRORS`)
is the harness failing, not the run: the statistics stop on one by default
(``evaluation.on_error: fail``) and name this command. It finds every run of the study whose
``eval.json`` is an evaluation error, evaluates those runs again through
:func:`~forgetting.evaluate.batch.evaluate_batch` limited to them (every other run's report
is left as it is, no run is redone) and rewrites each affected batch's evaluation manifest
``batches/…/eval.json``. The rewritten manifest is newer than the batch's analysis, so the next
``snakemake`` run analyses those batches again and regenerates the datasets, statistics and
tables from the new evaluations.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forgetting.evaluate.batch import evaluate_batch
from forgetting.foundation.layout import EVAL_JSON, Layout
from forgetting.records.eval_report import is_eval_error, read_report
from forgetting.study.config import Study
from forgetting.study.plan import Batch, plan_batches

#: the file name of a batch's evaluation manifest (``workflow/rules/evaluate.smk``)
MANIFEST = "eval.json"


@dataclass
class RedoReport:
    """The runs evaluated again, and their statuses afterwards."""

    batches: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)

    @property
    def still_errored(self) -> list[str]:
        return [rid for rid, status in self.statuses.items() if is_eval_error(status)]


def errored_runs(study: Study, batches: Sequence[Batch] | None = None) -> dict[str, list[str]]:
    """Batch key → the run ids of that batch whose ``eval.json`` is an evaluation error, or is
    there but unreadable (torn by a kill, say): never skipped silently, it is evaluated again."""
    layout = Layout(study.results_dir)
    out: dict[str, list[str]] = {}
    for batch in batches if batches is not None else plan_batches(study):
        for run in batch.runs:
            path = layout.run_dir(run.run_id) / EVAL_JSON
            report = read_report(path)
            torn = report is None and (path.exists() or path.is_symlink())  # there, but unreadable
            if torn or (report is not None and is_eval_error(report.status)):
                out.setdefault(batch.key, []).append(run.run_id)
    return out


def redo_errored(
    study: Study, *, say: Callable[[str], None] = lambda _: None
) -> RedoReport:
    """Evaluate again every run whose evaluation errored; see the module docstring."""
    layout = Layout(study.results_dir)
    batches = {b.key: b for b in plan_batches(study)}
    todo = errored_runs(study, list(batches.values()))
    report = RedoReport()
    for key, run_ids in todo.items():
        say(f"{key}: evaluating {len(run_ids)} run(s) again: {', '.join(run_ids)}")
        document = evaluate_batch(
            study,
            batches[key],
            manifest=layout.batch_dir(key) / MANIFEST,
            log=layout.results / "logs" / "evaluate" / f"{key}.log",
            only=set(run_ids),
        )
        report.batches.append(key)
        for rid in run_ids:
            report.statuses[rid] = document["runs"][rid]["status"]
            say(f"  {rid}: {report.statuses[rid]}")
    return report


def redo_command(configs: Sequence[str], overrides: Sequence[str] = ()) -> str:
    """The command line that redoes the study's evaluation errors (its config files in order,
    then any ``--set KEY=VALUE`` the study was loaded with)."""
    args = ["forgetting", "evaluate", "--errored"]
    here = Path.cwd()
    for config in configs:
        path = Path(config)
        if path.is_absolute() and path.is_relative_to(here):
            path = path.relative_to(here)  # as the user would type it from here
        args += ["--config", str(path)]
    for item in overrides:
        args += ["--set", item]
    return shlex.join(args)


def config_files_of(source: str) -> list[str] | None:
    """The config files a :class:`Study` was read from (its ``source``, as ``load_study`` writes
    it: ``a.yaml + b.yaml``), or None when the source names no existing files."""
    parts = [p.strip() for p in source.split(" + ")]
    return parts if parts and all(Path(p).is_file() for p in parts) else None
