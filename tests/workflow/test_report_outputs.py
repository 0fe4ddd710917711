"""A small synthetic study through collection, statistics, tables, figures and the HTML report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from forgetting.foundation.layout import Layout
from forgetting.records.schemas import read_dataset
from forgetting.report.collect import collect
from forgetting.report.figures import FIGURE_FORMATS, FIGURE_WIDTH_IN, FIGURES, PNG_DPI
from forgetting.report.stats.schemas import STATS
from forgetting.report.tables import FORMATS, TABLES
from forgetting_testkit.checkout import ROOT, bin_path, cli_env
from forgetting_testkit.stats_study import make_study

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The study with collected datasets and everything regenerated once by ``forgetting report``."""
    tmp = tmp_path_factory.mktemp("study")
    study = make_study(tmp)
    collect(study)
    return study, _report(study)


def _report(study) -> str:
    """``forgetting report`` on the study; its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "forgetting", "report", study.source],
        cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _outputs(study) -> dict[str, bytes]:
    layout = Layout(study.results_dir)
    files = [layout.tables / f"{t}.{f}" for t in TABLES for f in FORMATS]
    files += [layout.figures / f"{n}.{f}" for n in FIGURES for f in FIGURE_FORMATS]
    files += [layout.stats / f"{n}.parquet" for n in STATS]
    return {str(p.relative_to(layout.results)): p.read_bytes() for p in files}


def test_every_table_and_figure_is_written(built):
    study, stdout = built
    assert "tables: 32 files" in stdout and "figures: 10 files" in stdout  # 8 tables × 4 formats, 5 × 2
    layout = Layout(study.results_dir)
    table1 = (layout.tables / "table1.md").read_text()
    # 2 agents × (baseline + 5 configurations)
    assert table1.count("| Trae agent |") == 6 and table1.count("| mini-swe-agent |") == 6
    assert "SYNTHETIC DATA" in table1  # the config marks the study synthetic
    refetch = (layout.tables / "refetch.csv").read_text().splitlines()
    assert refetch[0].startswith(
        "agent,configuration,timing,scope,granularity,amount,refetch_rate,refetch_ratio,"
    )
    comparisons = (layout.tables / "comparisons.csv").read_text().splitlines()
    assert len(comparisons) == 1 + 4  # per agent: one timing and one granularity pair
    for name in FIGURES:
        with Image.open(layout.figures / f"{name}.png") as im:
            assert im.width == round(FIGURE_WIDTH_IN * PNG_DPI) and im.height > 2 * PNG_DPI  # 7 in wide
            pixels = np.asarray(im.convert("L"))
        assert pixels.std() > 10  # not a blank canvas
        assert (layout.figures / f"{name}.pdf").read_bytes().startswith(b"%PDF")


def test_regeneration_is_byte_identical(built, tmp_path):
    study, _ = built
    first = _outputs(study)
    layout = Layout(study.results_dir)
    for d in (layout.tables, layout.figures, layout.stats):
        shutil.rmtree(d)
    _report(study)
    assert _outputs(study) == first


def test_statistics_read_only_the_datasets(built):
    study, _ = built
    layout = Layout(study.results_dir)
    effects = read_dataset(layout.stats / "effects.parquet")
    runs = read_dataset(layout.dataset("runs"))
    assert effects.num_rows == 2 * 5 * 10  # evaluations × metrics
    assert set(runs.column("configuration").to_pylist()) - {"baseline"} == set(
        effects.column("configuration").to_pylist()
    )


def tool_missing(tool: str, skip_variable: str, packages: str) -> str | None:
    """Why a check that needs ``tool`` cannot run here, or None: the reason ./scripts/test
    exported in ``skip_variable`` when it could not install it, else a plain one."""
    if shutil.which(tool) is not None:
        return None
    return os.environ.get(skip_variable) or (
        f"{tool} not installed (Debian: apt-get install --no-install-recommends {packages}; "
        "./scripts/test installs it when run as root)"
    )


def test_latex_tables_compile(built, tmp_path):
    missing = tool_missing("pdflatex", "FORGETTING_TEX_SKIP", "texlive-latex-base texlive-latex-recommended")
    if missing:
        pytest.skip(missing)
    study, _ = built
    inputs = "\n".join(rf"\input{{{Layout(study.results_dir).tables / f'{t}.tex'}}}" for t in TABLES)
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\\usepackage[utf8]{inputenc}\\usepackage[T1]{fontenc}"
        "\\usepackage{booktabs,longtable}\\usepackage[landscape,margin=1cm]{geometry}"
        f"\\begin{{document}}\n{inputs}\n\\end{{document}}\n"
    )
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_snakemake_regenerates_from_the_datasets_alone_and_reports_everything(built, tmp_path):
    study, _ = built
    layout = Layout(study.results_dir)
    # only the datasets: no batch, run or plan file, so no upstream job could run
    shutil.rmtree(layout.results / "batches")
    for d in (layout.tables, layout.figures, layout.stats):
        shutil.rmtree(d)
    smk = [
        bin_path("snakemake"),
        "analysis",
        "--configfile",
        study.source,
        "--cores",
        "2",
        "--allowed-rules",
        "stats",
        "tables",
        "figures",
        "analysis",
    ]
    proc = subprocess.run([*smk, "-q"], cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all((layout.tables / f"{t}.{f}").is_file() for t in TABLES for f in FORMATS)
    report = tmp_path / "report.html"
    proc = subprocess.run(
        [*smk, "--report", str(report)], cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = report.read_text()
    names = [f"{t}.{f}" for t in TABLES for f in FORMATS] + [
        f"{n}.{f}" for n in FIGURES for f in FIGURE_FORMATS
    ]
    assert all(name in html for name in names)
    missing = tool_missing("chromium", "FORGETTING_CHROMIUM_SKIP", "chromium") and tool_missing(
        "chromium-browser", "FORGETTING_CHROMIUM_SKIP", "chromium"
    )
    if missing:
        pytest.skip(missing)
    shot = tmp_path / "report.png"
    check = subprocess.run(
        ["bash", str(ROOT / "scripts/check-report.sh"), str(report), str(shot), *names],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert shot.stat().st_size > 20000
