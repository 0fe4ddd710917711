"""``forgetting preflight --smoke``: one baseline run per agent, of the study's first task,
through run, evaluation and analysis — each stage's real code, as the workflow's jobs call it —
into ``<results>/preflight/smoke/`` (removed first: a smoke run never mixes with the study's)."""

from __future__ import annotations

import json
import shutil

from forgetting.analyze.batch import analyze_batch
from forgetting.cluster.preflight.checks import Check
from forgetting.evaluate import evaluate_batch
from forgetting.foundation.errors import UserError
from forgetting.foundation.layout import Layout
from forgetting.run import run_batch
from forgetting.study.config import Study, study_from_mapping
from forgetting.study.plan import plan_batches

ANALYSIS_OUTPUTS = ("summary", "calls", "tool_calls", "run_costs", "timings")


def smoke_study(study: Study) -> Study:
    raw = json.loads(json.dumps(study.as_config(), default=str))
    smoke_dir = study.results_dir / "preflight" / "smoke"
    raw.update(only=["baseline"], only_tasks=[study.tasks[0]], only_agents=None, force_rerun=True)
    raw["repeats"] = {**raw["repeats"], "baseline": 1}
    raw["study"] = {**raw["study"], "results_dir": str(smoke_dir)}
    return study_from_mapping(raw, source=f"{study.source} (smoke)", root=study.root)


def smoke_checks(study: Study) -> list[Check]:

    smoke = smoke_study(study)
    shutil.rmtree(smoke.results_dir, ignore_errors=True)
    layout = Layout(smoke.results_dir)
    out = []
    for batch in plan_batches(smoke):
        directory = layout.batch_dir(batch.key)
        log = smoke.results_dir / "logs" / f"{batch.agent}.log"
        (run,) = batch.runs
        stage = "run"
        try:
            runs = run_batch(smoke, batch, manifest=directory / "runs.json", log=log, echo=False)
            stage = "evaluation"
            evaluated = evaluate_batch(smoke, batch, manifest=directory / "eval.json", log=log)
            stage = "analysis"
            analysed = analyze_batch(smoke, batch, outputs={k: directory / f"{k}.parquet" for k in ANALYSIS_OUTPUTS},
                                     log=log)
        except UserError as exc:
            out.append(Check(f"smoke {batch.agent}", False, f"{run.task}: the {stage} failed: {exc} (log: {log})"))
            continue
        entry = runs["runs"][run.run_id]
        verdict = evaluated["runs"][run.run_id]
        out.append(Check(f"smoke {batch.agent}", analysed == 1,
                         f"{run.task}: run {entry['status']} after {entry['turns']} calls, evaluation "
                         f"{verdict.get('status')}, {analysed} run analysed ({directory})"))
    return out
