"""The hostile-input tests' shared parts: the tally every case reports to (printed in the
terminal summary: ``hostile inputs: N cases, 0 tracebacks, 0 hangs, 0 changed files``, then
the cases by surface and by class), and the inputs the cases start from (a small synthetic
study in the exact on-disk format).

A case's *class* is the kind of hostility it stands for (``non-finite number``, ``duplicate
YAML key``, ``full disk``, …): ``tally.record(surface, outcome, klass=...)``. A case that names
none is counted under ``general``, so every file's cases land somewhere in the summary."""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from forgetting_testkit.checkout import ROOT
from forgetting_testkit.hostile import Outcome, problems

#: the class of a case that names none
GENERAL = "general"


@dataclass
class Tally:
    cases: Counter[str] = field(default_factory=Counter)
    classes: Counter[str] = field(default_factory=Counter)
    tracebacks: int = 0
    hangs: int = 0
    changed: int = 0
    bad: int = 0

    def record(
        self, surface: str, outcome: Outcome, *, expect: str = "any", more: list[str] = (), klass: str = GENERAL
    ) -> list[str]:
        """Count one case under ``surface`` and its class ``klass`` and return what is wrong
        with it (``more``: what the caller found besides)."""
        self.cases[surface] += 1
        self.classes[klass or GENERAL] += 1
        self.tracebacks += outcome.traceback is not None
        self.hangs += outcome.hang
        self.changed += bool(outcome.changed)
        found = [*problems(outcome, expect=expect), *more]
        self.bad += bool(found)
        return found


    def count(self, surface: str, klass: str = GENERAL) -> None:
        """Count one case checked in process, not through a command (no outcome to judge)."""
        self.cases[surface] += 1
        self.classes[klass or GENERAL] += 1


TALLY = Tally()


@pytest.fixture(scope="session")
def tally() -> Tally:
    return TALLY


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TALLY.cases:
        return
    total = sum(TALLY.cases.values())
    terminalreporter.write_line(
        f"hostile inputs: {total} cases, {TALLY.tracebacks} tracebacks, {TALLY.hangs} hangs, "
        f"{TALLY.changed} changed files, {TALLY.bad} failing the contract"
    )
    terminalreporter.write_line(
        "hostile inputs by surface: " + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.cases.items()))
    )
    terminalreporter.write_line(
        f"hostile inputs by class ({len(TALLY.classes)} classes): "
        + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.classes.items()))
    )


@dataclass(frozen=True)
class World:
    """What the cases start from (read-only: every case checks it is left as it was)."""

    study: Path  # a synthetic demo study: run directories, call logs, trajectories, batch files
    config: Path  # its config (results_dir: the study)
    mini_run: Path  # a mini (tool calling) run directory
    text_run: Path  # a mini-text run directory

    @property
    def mini_log(self) -> Path:
        return self.mini_run / "calls.jsonl"

    @property
    def mini_trajectory(self) -> Path:
        return self.mini_run / "trajectory.json"


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> World:
    from forgetting.analyze.batch import analyze_batch
    from forgetting.foundation.layout import Layout
    from forgetting.report.collect import collect
    from forgetting.study.config import load_study
    from forgetting.study.plan import plan_batches
    from forgetting_testkit.synth import synthesize

    out = tmp_path_factory.mktemp("hostile") / "study"
    synthesize(ROOT / "config/demo.yaml", out, runs=8, workers=1, progress=lambda _: None)
    study = load_study(out / "study.yaml")
    layout = Layout(study.results_dir)
    for batch in plan_batches(study):
        d = layout.batch_dir(batch.key)
        analyze_batch(study, batch, outputs={n: d / f"{n}.parquet" for n in
                                             ("summary", "calls", "tool_calls", "run_costs", "timings")})
    collect(study)
    runs = sorted(p.parent for p in (out / "runs").rglob("run.json"))
    mini = next(r for r in runs if r.parts[-4] == "mini")
    text = next(r for r in runs if r.parts[-4] == "mini-text")
    shutil.rmtree(layout.results / "logs", ignore_errors=True)
    return World(out, out / "study.yaml", mini, text)
