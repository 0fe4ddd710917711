"""A small synthetic study on disk for the collection, statistics and reporting tests.

Writes a study config (2 agents, a few tasks, a handful of configurations, 3 baseline
repeats) and every batch's analysis tables as the analysis stage would, with the synthetic
generator of :mod:`forgetting_testkit.effects` standing in for real runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import yaml

from forgetting.foundation.layout import Layout
from forgetting.records.schemas import write_table
from forgetting.study.config import Study, load_study
from forgetting.study.plan import plan_batches, plan_runs
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.effects import synthetic_tables

TASKS = [
    line.strip()
    for line in (ROOT / "resources/tasks/swe-bench-verified-100.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
CONFIGURATIONS = [
    "delayed-turn-reasoning-100",
    "delayed-turn-tool_output-50",
    "delayed-token-tool_output-50",
    "immediate-turn-tool_output-50",
    "immediate-token-both-75",
]


def write_config(
    tmp: Path,
    *,
    n_tasks: int = 12,
    statistics: dict[str, Any] | None = None,
    configurations: list[str] | None = None,
) -> Path:
    cfg = {
        "study": {"name": "stats-test", "seed": 11, "results_dir": str(tmp / "results"), "synthetic": True},
        "agents": ["trae", "mini"],
        "tasks": {"ids": TASKS[:n_tasks]},
        "dataset": {
            "kind": "swebench",
            "known_ids": str(ROOT / "resources/tasks/swe-bench-verified-all.txt"),
        },
        "repeats": {"baseline": 3, "deletion": 1},
        "configurations": {"names": configurations or CONFIGURATIONS},
        "model": {"backend": "vllm", "name": "test-model"},
        "execution": {"batch_size": 8},
        "statistics": {"resamples": 1000, "seed": 5, **(statistics or {})},
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def write_batches(study: Study) -> None:
    """Every batch's summary/calls/tool_calls/run_costs/timings Parquet, as analyze_batch writes them."""
    runs = plan_runs(study)
    tables = synthetic_tables(runs, with_calls=True)
    layout = Layout(study.results_dir)
    files = {
        "runs": "summary",
        "calls": "calls",
        "tool_calls": "tool_calls",
        "run_costs": "run_costs",
        "timings": "timings",
    }
    for batch in plan_batches(study, runs):
        ids = [r.run_id for r in batch.runs]
        d = layout.batch_dir(batch.key)
        d.mkdir(parents=True, exist_ok=True)
        for name, stem in files.items():
            t = tables[name]
            write_table(
                t.filter(pc.is_in(t.column("run_id"), value_set=pa.array(ids))), d / f"{stem}.parquet"
            )


def make_study(tmp: Path, **kwargs: Any) -> Study:
    study = load_study(write_config(tmp, **kwargs))
    write_batches(study)
    return study
