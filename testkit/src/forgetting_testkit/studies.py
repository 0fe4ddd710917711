"""Synthetic studies on disk for the end-to-end tests: made from a config and analysed batch by
batch as the workflow's ``analyze_batch`` jobs do, and copied where a test may change them."""

from __future__ import annotations

import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from forgetting.analyze.batch import analyze_batch
from forgetting.foundation.layout import Layout
from forgetting.study.config import Study, load_study
from forgetting.study.plan import plan_batches
from forgetting_testkit.checkout import ROOT
from forgetting_testkit.synth import synthesize

#: the tables an ``analyze_batch`` job writes into its batch directory
BATCH_FILES = ("summary", "calls", "tool_calls", "run_costs", "timings")


def analyze_batches(study: Study, keys: Collection[str] | None = None) -> None:
    """Analyse every batch of ``study`` (or those of ``keys``) into its batch directory."""
    layout = Layout(study.results_dir)
    for batch in plan_batches(study):
        if keys is None or batch.key in keys:
            d = layout.batch_dir(batch.key)
            analyze_batch(study, batch, outputs={n: d / f"{n}.parquet" for n in BATCH_FILES})


def paper_config() -> dict[str, Any]:
    """The paper's study config (config/config.yaml), the files it names made absolute."""
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["dataset"]["known_ids"] = str(ROOT / cfg["dataset"]["known_ids"])
    cfg["pricing"]["dir"] = str(ROOT / "resources/pricing")
    return cfg


def synthetic_study(base: Path, cfg: Mapping[str, Any]) -> Path:
    """The study of ``cfg`` synthesized into ``base/study`` and analysed; that directory."""
    (base / "source.yaml").write_text(yaml.safe_dump(dict(cfg)))
    synthesize(base / "source.yaml", base / "study", workers=2, progress=lambda _: None)
    analyze_batches(load_study(base / "study" / "study.yaml"))
    return base / "study"


def place(template: Path, dest: Path) -> Path:
    """A copy of a synthetic study whose config points at the copy; returns its config."""
    shutil.copytree(template, dest)
    cfg = yaml.safe_load((dest / "study.yaml").read_text())
    cfg["study"]["results_dir"] = str(dest)
    (dest / "study.yaml").write_text(yaml.safe_dump(cfg))
    return dest / "study.yaml"
