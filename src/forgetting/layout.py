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
      stats/  tables/  figures/  report/
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RUN_JSON = "run.json"
CALLS = "calls.jsonl"
TRAJECTORY = "trajectory.json"
PATCH = "patch.diff"
EVAL_JSON = "eval.json"
EVAL_DIR = "eval"
AGENT_LOG = "agent.log"


@dataclass(frozen=True)
class Layout:
    results: Path

    def run_dir(self, run_id: str) -> Path:
        return self.results / "runs" / run_id

    def batch_dir(self, batch_key: str) -> Path:
        return self.results / "batches" / batch_key

    @property
    def plan_table(self) -> Path:
        return self.results / "plan" / "runs.parquet"

    @property
    def datasets(self) -> Path:
        return self.results / "datasets"

    def dataset(self, name: str) -> Path:
        return self.datasets / f"{name}.parquet"

    @property
    def stats(self) -> Path:
        return self.results / "stats"

    @property
    def tables(self) -> Path:
        return self.results / "tables"

    @property
    def figures(self) -> Path:
        return self.results / "figures"

    @property
    def report(self) -> Path:
        return self.results / "report"
