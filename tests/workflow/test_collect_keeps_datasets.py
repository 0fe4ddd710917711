"""Through Snakemake itself: a ``collect`` job that fails on a bad run keeps the last good
datasets (Snakemake deletes a job's declared outputs before it runs; the datasets are flagged
``update`` and replaced only as a complete set), its script ends with one ``error:`` line and
no traceback, and the next good collection — and the statistics after it — work as before."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from forgetting.foundation.layout import Layout
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.synth import synthesize


def digest(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.glob("*.parquet"))}


def snakemake(config: Path, *targets: Path) -> subprocess.CompletedProcess[str]:
    argv = [bin_path("snakemake"), "--cores", "2", "--configfile", str(config), "--config", "regenerate=true",
            "--directory", str(ROOT), *map(str, targets)]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900, env=cli_env())


@pytest.mark.slow
def test_a_failed_collection_keeps_the_last_good_datasets(tmp_path):
    synthesize(ROOT / "config/demo.yaml", tmp_path / "study", runs=16, workers=2, progress=lambda _: None)
    config = tmp_path / "study" / "study.yaml"
    layout = Layout(load_study(config).results_dir)
    runs = layout.dataset("runs")
    first = snakemake(config, runs)
    assert first.returncode == 0, first.stderr
    good = digest(layout.datasets)
    assert len(good) == 5

    summary = sorted((layout.results / "batches").rglob("summary.parquet"))[0]
    analysed = summary.read_bytes()
    summary.write_bytes(b"not parquet")  # one batch's analysis is unreadable: its runs are missing
    failed = snakemake(config, runs)
    assert failed.returncode != 0
    assert "Traceback" not in failed.stderr and "Traceback" not in failed.stdout
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: collect: ") and "have no readable output" in errors[0]
    log = (layout.results / "logs" / "collect.log").read_text().splitlines()
    assert log[-1] == errors[0] and "Traceback" not in "\n".join(log)
    assert digest(layout.datasets) == good  # the last good datasets, byte for byte
    assert not list(layout.datasets.glob(".*.tmp"))

    summary.write_bytes(analysed)  # the batch's analysis is good again: collected, and analysed on
    again = snakemake(config, layout.stats / "effects.parquet")
    assert again.returncode == 0, again.stderr
    assert "rule collect:" in again.stderr and "rule stats:" in again.stderr
    assert digest(layout.datasets) == good
    assert (layout.stats / "effects.parquet").is_file()
