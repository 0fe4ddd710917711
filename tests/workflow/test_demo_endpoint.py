"""The demo through an endpoint, as docs/runs.md runs it: ``config/demo.yaml`` with the overlay
``config/demo-endpoint.yaml`` (``model.backend: endpoint``), the scripted stand-in started
separately (``forgetting scripted-model``) behind the named fake provider (a test double for a
hosted provider, which wants the key), the workflow run by Snakemake with the local profile —
narrowed to two tasks and two configurations.

Its runs and their analysis are those of the scripted backend (the same stand-in, reached
another way) but for the cached tokens the server reported — the provider's own rule, not the
stand-in's emulated vLLM cache: the known gap the cost validation shows — and the recognisable
key is in no file of the results, no Snakemake log and nothing Snakemake printed."""

from __future__ import annotations

import subprocess
import time

import pyarrow.parquet as pq
import pytest
import yaml

from forgetting.foundation.layout import Layout
from forgetting.records import read_run_record
from forgetting.study.config import load_study
from forgetting.study.plan import plan_batches
from forgetting_testkit.checkout import ROOT, bin_path
from forgetting_testkit.endpoints import TEST_KEY, files_holding, key_env, provider, scripted_model

pytestmark = pytest.mark.slow

NARROW = ["only_tasks=[demo__confkit-1,demo__timekit-1]", "only=[baseline,delayed-turn-tool_output-100]"]


def _snakemake(configs, env):
    cmd = [bin_path("snakemake"), "--profile", "profiles/local", "--configfile", *map(str, configs),
           "--config", *NARROW]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _overlay(path, **sections):
    path.write_text(yaml.safe_dump(sections))
    return path


def test_the_demo_through_an_endpoint_is_the_demo_and_the_key_stays_out(tmp_path):
    demo = yaml.safe_load((ROOT / "config" / "demo-endpoint.yaml").read_text())
    assert demo["model"]["backend"] == "endpoint" and demo["model"]["endpoint"]["api_key_env"] == "FORGETTING_DEMO_KEY"
    started = time.time()
    with scripted_model(tmp_path, extra=["--config", "config/demo.yaml"]) as model, provider(tmp_path, model) as fake:
        # the provider's port instead of the overlay's fixed one, results in this test's directory
        overlay = _overlay(tmp_path / "here.yaml", study={"results_dir": str(tmp_path / "endpoint")},
                           model={"endpoint": {"base_url": fake.url}})
        env = {**key_env(), "FORGETTING_DEMO_KEY": TEST_KEY}
        through = _snakemake(["config/demo.yaml", "config/demo-endpoint.yaml", overlay], env)
        assert through.returncode == 0, through.stderr[-4000:]
        assert fake.stats()["auth_failures"] == 0 and fake.stats()["requests"]["POST /v1/chat/completions"] > 0
    plain_overlay = _overlay(tmp_path / "plain.yaml", study={"results_dir": str(tmp_path / "scripted")})
    direct = _snakemake(["config/demo.yaml", plain_overlay], key_env())
    assert direct.returncode == 0, direct.stderr[-4000:]

    study = load_study([ROOT / "config" / "demo.yaml", ROOT / "config" / "demo-endpoint.yaml", overlay],
                       {"only_tasks": ["demo__confkit-1", "demo__timekit-1"],
                        "only": ["baseline", "delayed-turn-tool_output-100"]})
    batches = plan_batches(study)
    assert len(batches) == 2  # only_tasks packs each agent's runs across configurations (forgetting.study.plan)
    a, b = Layout(tmp_path / "endpoint"), Layout(tmp_path / "scripted")
    for batch in batches:
        for run in batch.runs:
            via, plain = (read_run_record(layout.run_dir(run.run_id) / "run.json") for layout in (a, b))
            assert via.model_backend == plain.model_backend == "scripted"
            assert via.versions["model"]["backend"] == "endpoint" and plain.versions["model"]["backend"] == "scripted"
            assert (via.status, via.turns, via.patch_bytes) == (plain.status, plain.turns, plain.patch_bytes)
        via, plain = (pq.read_table(layout.batch_dir(batch.key) / "summary.parquet") for layout in (a, b))
        assert via.column_names == plain.column_names
        reported_columns = {"reported_cached_tokens", "cost_reported"}  # what the server's own counts price
        assert reported_columns <= set(via.column_names)
        for column in via.column_names:  # the analysis of the same runs …
            if column not in reported_columns:
                assert via.column(column).to_pylist() == plain.column(column).to_pylist(), column
        # … but for what the server reported as cached: the provider's own rule (whole 128-token blocks
        # past 1,024), not the stand-in's emulated vLLM cache (16-token blocks): fewer, never more
        reported = zip(via.column("reported_cached_tokens").to_pylist(),
                       plain.column("reported_cached_tokens").to_pylist(), strict=True)
        assert all(0 < x < y for x, y in reported)
        # … so the reported view prices more prompt tokens at the uncached rate: never cheaper
        costs = zip(via.column("cost_reported").to_pylist(), plain.column("cost_reported").to_pylist(), strict=True)
        assert all(x >= y for x, y in costs)

    logs = [p for p in (ROOT / ".snakemake" / "log").glob("*.snakemake.log") if p.stat().st_mtime >= started]
    assert logs and files_holding(TEST_KEY, tmp_path, *logs) == []
    assert TEST_KEY not in through.stdout + through.stderr
