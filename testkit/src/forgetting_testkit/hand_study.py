"""The hand-built datasets of tests/stats/test_hand.py (also used by the evaluation-error,
paired-task and table-note tests): four tasks A–D; the baseline runs twice per task, two
configurations once. The expected numbers in those tests are worked out from the rows below.
"""

from __future__ import annotations

import pyarrow as pa

from forgetting.grid import paper_configuration
from forgetting.records.schemas import RUNS_SCHEMA, TOOL_CALLS_SCHEMA
from forgetting.study.plan import run_id

DELAYED = "delayed-turn-tool_output-50"
IMMEDIATE = "immediate-turn-tool_output-50"

# (configuration, task, repeat): resolved, turns, reads, re-fetches, capped, looping
RUNS = {
    ("baseline", "A", 1): (True, 10, 4, 0, False, False),
    ("baseline", "A", 2): (True, 90, 4, 1, False, False),
    ("baseline", "B", 1): (True, 30, 10, 1, False, False),
    ("baseline", "B", 2): (False, 40, 0, 0, False, False),
    ("baseline", "C", 1): (False, 50, 5, 0, False, False),
    ("baseline", "C", 2): (False, 60, 5, 1, True, False),
    ("baseline", "D", 1): (True, 70, 2, 0, False, False),
    ("baseline", "D", 2): (True, 80, 2, 0, False, False),
    (DELAYED, "A", 1): (True, 20, 8, 4, False, False),
    (DELAYED, "B", 1): (False, 60, 10, 2, False, True),
    (DELAYED, "C", 1): (False, 100, 0, 0, True, False),
    (DELAYED, "D", 1): (True, 40, 2, 0, False, False),
    (IMMEDIATE, "A", 1): (False, 40, 8, 4, False, False),
    (IMMEDIATE, "B", 1): (False, 80, 10, 2, False, False),
    (IMMEDIATE, "C", 1): (False, 120, 0, 0, False, False),
    (IMMEDIATE, "D", 1): (True, 60, 2, 0, False, False),
}
# the delayed configuration's deleted / kept read outputs and how many were re-fetched
OUTPUTS = {"A": (4, 3, 4, 1), "B": (6, 2, 4, 0), "C": (0, 0, 0, 0), "D": (0, 0, 2, 0)}
# re-fetch distances per run
DISTANCES = {
    (DELAYED, "A", 1): [3, 5, 7, 9],
    (DELAYED, "B", 1): [2, 4],
    ("baseline", "A", 2): [6],
    ("baseline", "B", 1): [8],
    ("baseline", "C", 2): [10],
}


def runs_table(runs=RUNS, missing=(), eval_errors=()) -> pa.Table:
    """The runs dataset of RUNS; run ids in ``missing`` are missing rows, those in
    ``eval_errors`` evaluated with status ``error`` (so not resolved)."""
    rows = []
    for (conf, task, rep), (resolved, turns, reads, refetches, capped, looping) in runs.items():
        d = paper_configuration(conf)
        row = {name: None for name in RUNS_SCHEMA.names}
        rid = run_id("mini", conf, task, rep)
        row.update(
            run_id=rid,
            agent="mini",
            configuration=conf,
            task=task,
            repeat=rep,
            seed=1,
            **d.columns(),
            model_backend="test",
            status="missing" if rid in missing else "submitted",
        )
        if rid not in missing:
            deleted = OUTPUTS[task] if conf == DELAYED else (0, 0, reads, 0)
            cache_factor = 10 if conf != "baseline" else 20  # deletion re-bills: caching-aware cost rises
            errored = rid in eval_errors
            row.update(
                resolved=resolved and not errored,
                eval_status="error" if errored else ("resolved" if resolved else "unresolved"),
                turns=turns,
                n_reads=reads,
                n_refetches=refetches,
                capped=capped,
                looping=looping,
                prompt_tokens=turns * (50 if conf != "baseline" else 100),
                output_tokens=turns * 10,
                cost_flat=turns / 10,
                cost_cache=turns / cache_factor,
                n_outputs_deleted=deleted[0],
                n_outputs_deleted_refetched=deleted[1],
                n_outputs_kept=deleted[2],
                n_outputs_kept_refetched=deleted[3],
            )
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=RUNS_SCHEMA)


def tool_calls_table() -> pa.Table:
    rows = []
    for (conf, task, rep), dists in DISTANCES.items():
        for k, dist in enumerate(dists):
            row = {name: None for name in TOOL_CALLS_SCHEMA.names}
            row.update(
                run_id=run_id("mini", conf, task, rep),
                turn=10 + k,
                index=0,
                label="read",
                is_read=True,
                is_refetch=True,
                refetch_distance=dist,
            )
            rows.append(row)
    # a read that is no re-fetch carries no distance and must not count
    rows.append({**rows[0], "is_refetch": False, "refetch_distance": None})
    return pa.Table.from_pylist(rows, schema=TOOL_CALLS_SCHEMA)
