"""docs/cluster.md's GPU-time arithmetic, recomputed from the code that sizes the jobs
(``forgetting.run.gpu_time``): every figure the page states is the model's own, rounded as shown."""

from __future__ import annotations

import dataclasses
import math

import pytest

from forgetting.run.gpu_time import THROUGHPUT, batch_minutes, run_cost
from forgetting_testkit.checkout import ROOT

DOC = (ROOT / "docs" / "cluster.md").read_text()
BATCHES, RUNS, BATCH, CONCURRENCY = 94, 9_400, 100, 16
typical, worst = run_cost(THROUGHPUT.typical_calls), run_cost(200)
half = dataclasses.replace(THROUGHPUT, prefill_per_s=THROUGHPUT.prefill_per_s / 2)


def minutes(runs: int, concurrency: int, calls: int, t=THROUGHPUT) -> float:
    return batch_minutes(runs, concurrency, calls, t)


def _gpu_hours(batch_min: float) -> str:
    return f"{BATCHES * batch_min / 60:,.0f}"


FIGURES = {
    "typical run's GPU work": f" {typical.gpu_s:.2f} s; L = ",
    "typical run's wall time": f"= {typical.wall_s / 60:.2f} min. GPU-bound",
    "typical batch": f"**{minutes(BATCH, CONCURRENCY, 40):.1f} min**",
    "worst batch": f"**{minutes(BATCH, CONCURRENCY, 200):.1f} min**",
    "worst run's GPU work": f"= {worst.gpu_s:.1f} s; L",
    "study, typical": f"**{_gpu_hours(minutes(BATCH, CONCURRENCY, 40))} GPU-hours typical**",
    "study, worst": f"**{_gpu_hours(minutes(BATCH, CONCURRENCY, 200))} GPU-hours in",
    "11 in flight, latency-bound":
        f"⌈100 / 11⌉ × {typical.wall_s / 60:.2f} = {math.ceil(BATCH / 11) * typical.wall_s / 60:.1f} min",
    "11 in flight, batch": f"= {minutes(BATCH, 11, 40):.1f} min and the study {_gpu_hours(minutes(BATCH, 11, 40))} "
                           "GPU-hours",
    "half prefill": f"takes {minutes(BATCH, CONCURRENCY, 40, half):.1f} min (GPU-bound: 100 × "
                    f"{run_cost(40, half).gpu_s:.1f} s) and the study {_gpu_hours(minutes(BATCH, 16, 40, half))}",
    "one server per run": f"{RUNS:,} × {THROUGHPUT.server_min + typical.wall_s / 60:.2f} min = "
                          f"{RUNS * (THROUGHPUT.server_min + typical.wall_s / 60) / 60:,.0f} GPU-hours",
    "route C's one server": f"{RUNS:,} × G = {RUNS * typical.gpu_s / 3600:.0f} GPU-hours",
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_the_page_states_the_models_figure(name):
    figure = FIGURES[name]
    assert figure in DOC, f"{name}: docs/cluster.md should say {figure!r}"
