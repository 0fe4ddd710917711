"""A study narrowed to one task (only_tasks) packs each agent's runs across its configurations
into as few batch jobs as execution.batch_size allows; the full study's batches then find
those runs finished and keep them (real mini-swe-agent runs on a demo task, the scripted model)."""

from __future__ import annotations

import pytest

from forgetting.run import run_batch
from forgetting.study.config import load_study
from forgetting.study.plan import PACKED, plan_batches
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.runner import run_json, study_at

pytestmark = pytest.mark.slow

DELETED = "delayed-turn-tool_output-100"
TASKS = ["demo__confkit-1", "demo__timekit-1"]


def test_one_task_of_the_paper_study_costs_at_most_two_batch_jobs():
    study = load_study(ROOT / "config" / "config.yaml", {"only_tasks": ["django__django-11149"]})
    batches = plan_batches(study)
    assert len(batches) == 2 and {b.agent for b in batches} == {"mini", "trae"}
    assert all(b.configuration == PACKED and len(b.runs) == 47 for b in batches)  # 42 configurations + 5 baseline
    full = {r.run_id for b in plan_batches(load_study(ROOT / "config" / "config.yaml")) for r in b.runs}
    assert {r.run_id for b in batches for r in b.runs} <= full  # the same runs, the same run directories


def test_the_full_study_finds_the_narrowed_runs_finished(tmp_path):
    sections = {"tasks": {"ids": TASKS}, "configurations": {"names": [DELETED]}}
    narrowed = study_at(tmp_path, **sections, only_tasks=[TASKS[0]])
    (packed,) = plan_batches(narrowed)
    assert packed.configuration == PACKED and {r.configuration for r in packed.runs} == {"baseline", DELETED}
    run_batch(narrowed, packed, log=tmp_path / "narrowed.log", echo=False)
    before = {r.run_id: run_json(narrowed, r.run_id)["started"] for r in packed.runs}

    full = study_at(tmp_path, **sections)
    batches = plan_batches(full)
    assert {b.configuration for b in batches} == {"baseline", DELETED}
    for batch in batches:
        log = tmp_path / f"full-{batch.configuration}.log"
        run_batch(full, batch, log=log, echo=False)
        assert f"1 of {len(batch.runs)} runs finished before; kept" in log.read_text()
    assert {rid: run_json(full, rid)["started"] for rid in before} == before  # not redone
