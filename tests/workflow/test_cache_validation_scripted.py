"""End to end with the scripted model: real mini-swe-agent through the deletion proxy, the
scripted model reporting ``prompt_tokens`` and ``prompt_tokens_details.cached_tokens`` from its
emulated vLLM prefix cache, then the whole workflow to the cache validation table and figure.

The scripted model renders prompts with the project's own chat format and caches 16-token
blocks of each run's prompts, the last token always recomputed — the ``vllm-blocks`` profile's
rules. So the prompt check must agree on every call, ``vllm-blocks`` must reconstruct exactly the
cache hits the server reported (gap 0, CI [0, 0]), and the paper's token-level lower bound must
expect more."""

from __future__ import annotations

import csv
import subprocess

import pytest

from forgetting.foundation.layout import Layout
from forgetting.study.config import load_study
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.runner import write_study

pytestmark = pytest.mark.slow


def test_the_scripted_model_through_the_workflow_shows_the_cache_validation(tmp_path):
    config = write_study(
        tmp_path,
        agents=["mini"],
        tasks={"ids": ["demo__confkit-1", "demo__ledger-1"]},
        repeats={"baseline": 1, "deletion": 1},
        configurations={"names": ["delayed-turn-tool_output-100"]},
        agent={"turn_cap": 40, "command_timeout_s": 60, "fixed_test_durations": True},
        pricing={"profiles": ["paper", "vllm-blocks", "min-prefix"]},
        statistics={"resamples": 200},
    )
    done = subprocess.run(
        [bin_path("snakemake"), "--cores", "2", "--configfile", str(config)],
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    layout = Layout(load_study(config).results_dir)
    with open(layout.tables / "cache_validation.csv", newline="") as fh:
        rows = {(r["configuration"], r["profile"]): r for r in csv.DictReader(fh)}
    assert set(rows) == {(c, p) for c in ("baseline", "delayed-turn-tool_output-100")
                         for p in ("paper", "vllm-blocks", "min-prefix")}
    for r in rows.values():
        calls = int(r["calls"])
        assert calls > 10 and int(r["reported_calls"]) == calls  # the server reported on every call
        assert (int(r["prompt_checked_calls"]), int(r["prompt_mismatch_calls"])) == (calls, 0)
        assert float(r["prompt_difference_per_call"]) == 0.0  # the rebuilt prompt is the served one
        assert 0.5 < float(r["reported_share"]) < 1.0
    for conf in ("baseline", "delayed-turn-tool_output-100"):
        exact = rows[conf, "vllm-blocks"]
        assert (float(exact["gap"]), float(exact["gap_ci_low"]), float(exact["gap_ci_high"])) == (0.0, 0.0, 0.0)
        assert exact["reported_share"] == exact["reconstructed_share"]
        assert float(exact["cost_reconstructed"]) == pytest.approx(float(exact["cost_reported"]), rel=1e-9)
        paper = rows[conf, "paper"]
        assert float(paper["gap_ci_low"]) > 0  # every prefix at token level: more hits than any real cache
    md = (layout.tables / "cache_validation.md").read_text()
    assert md.count("| 0.0 [0.0, 0.0] |") == 2 and "All " in md and "checked calls agree." in md
    assert "Demo data: runs of the scripted stand-in model" in md
    for fmt in ("pdf", "png"):
        assert (layout.figures / f"cache_validation.{fmt}").stat().st_size > 5000
