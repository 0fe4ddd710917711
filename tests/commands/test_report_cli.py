"""``forgetting report`` and the statistics settings: bad input is one line, before any work."""

from __future__ import annotations

import pytest

from forgetting.foundation.errors import ConfigError
from forgetting.study.config import load_study
from forgetting.study.statistics import StatsSettings
from forgetting_testkit.stats_study import write_config


def test_report_without_datasets_names_the_missing_file(tmp_path, run_cli):
    config = write_config(tmp_path, n_tasks=3)
    proc = run_cli("report", config, "--only", "stats")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path / 'results/datasets/runs.parquet'}: dataset not found"


def test_statistics_options_are_checked_and_read(tmp_path):
    study = load_study(
        write_config(tmp_path, n_tasks=3, statistics={"holm_family": "table", "refetch_rate": "run_mean"})
    )
    s = study.statistics
    assert (s.holm_family, s.refetch_rate, s.baseline_median, s.resamples, s.alpha) == (
        "table",
        "run_mean",
        "pooled",
        1000,
        pytest.approx(0.05),
    )
    with pytest.raises(
        ConfigError, match=r"statistics.holm_family: 'rows' is not allowed; allowed values: column, table"
    ):
        load_study(write_config(tmp_path, n_tasks=3, statistics={"holm_family": "rows"}))
    with pytest.raises(ConfigError, match="missing_runs"):
        StatsSettings.from_section({"missing_runs": "skip"})


def test_command_line_flags_become_booleans():
    from forgetting.workflow import normalize_flags

    config = {"regenerate": "true", "force_rerun": "False", "only": "true"}
    normalize_flags(config)
    assert config == {"regenerate": True, "force_rerun": False, "only": "true"}
