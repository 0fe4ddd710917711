"""The paper's tables as CSV, Markdown, LaTeX and HTML, from the statistics.

================  ===============================================================================
``stats_tables``  the statistics as rows (:class:`StatsTables`; also what the figures draw)
``columns``       tables from declarations: :class:`Column`, :class:`Estimate` and a table's
                  :class:`Spec`, which yields both the display and the data (CSV) view
``build``         the seven tables: each a declaration, the rows it lists and its notes
``notes``         the notes under the tables, generated from the settings
``format``        numbers for reading; ``writers``: the four renderings of a table
================  ===============================================================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from forgetting.foundation.errors import RunOutputError, UserError
from forgetting.foundation.faults import checkpoint
from forgetting.foundation.layout import Files, Layout, output_files, select_outputs
from forgetting.foundation.stagelog import StageLog
from forgetting.records.schemas import read_dataset, read_metadata
from forgetting.report.stats.labels import provenance_note
from forgetting.report.stats.schemas import SETTINGS_FIELD, STATS
from forgetting.report.tables.build import BUILDERS, FORMATS, TABLES, StatsTables
from forgetting.report.tables.notes import NoteContext
from forgetting.report.tables.writers import to_markdown, write_table
from forgetting.study.config import Study
from forgetting.study.statistics import StatsSettings

__all__ = ["FORMATS", "TABLES", "load_stats_tables", "render_table", "table_paths", "write_tables"]


def table_paths(tables_dir: str | os.PathLike[str]) -> dict[str, dict[str, Path]]:
    """Table name → format → path under ``tables_dir``."""
    return output_files(tables_dir, TABLES, FORMATS)


def _stats_paths(
    study: Study, inputs: Files | None
) -> dict[str, Path]:
    if inputs is None:
        d = Layout(study.results_dir).stats
        return {n: d / f"{n}.parquet" for n in STATS}
    if isinstance(inputs, Mapping):
        return {str(k): Path(v) for k, v in inputs.items() if str(k) in STATS}
    return {Path(p).stem: Path(p) for p in inputs if Path(p).stem in STATS}


def _setting_name(key: str) -> str:
    return "evaluation.on_error" if key == "on_error" else f"statistics.{key}"


def check_computed_with(paths: Mapping[str, Path], settings: StatsSettings) -> None:
    """Every statistics file was computed with the study's current settings (recorded by the
    ``stats`` stage), so the notes describe what the numbers are; else one line naming the
    setting and how to recompute."""
    wanted = settings.computed_with()
    for name in STATS:
        raw = read_metadata(paths[name]).get(SETTINGS_FIELD)
        if raw is None:
            raise RunOutputError(
                f"{paths[name]}: records no statistics settings; recompute the statistics "
                "(forgetting report CONFIG --only stats)"
            )
        recorded = json.loads(raw)
        for key, value in wanted.items():
            if recorded.get(key) != value:
                raise RunOutputError(
                    f"{paths[name]}: computed with {_setting_name(key)} = {recorded.get(key)!r}, the config "
                    f"says {value!r}; recompute the statistics (forgetting report CONFIG --only stats)"
                )


def load_stats_tables(
    study: Study, inputs: Files | None = None
) -> StatsTables:
    """The statistics of ``study`` (from its ``stats/`` Parquet files) ready for tables and figures."""
    paths = _stats_paths(study, inputs)
    tables = {n: read_dataset(paths[n], STATS[n]) for n in STATS}
    settings = study.statistics
    check_computed_with(paths, settings)
    primary = str(study.pricing.primary)
    used = {p for p in tables["summary"].column("pricing_profile").to_pylist() if p}
    if used and used != {primary}:
        raise RunOutputError(
            f"{paths['summary']}: computed with pricing.primary = {sorted(used)[0]!r}, the config says "
            f"{primary!r}; recompute the statistics (forgetting report CONFIG --only stats)"
        )
    provenance = provenance_note(tables["summary"].column("model_backend").to_pylist())
    return StatsTables.from_tables(
        tables["effects"],
        tables["comparisons"],
        tables["summary"],
        settings,
        provenance,
        context=NoteContext.from_study(study),
        study_tasks=len(study.tasks),
        validation=tables["cache_validation"],
    )


def write_tables(
    study: Study, inputs: Files | None = None, outputs: Files | None = None, log: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Every table of :data:`TABLES` in every format; ``outputs`` (paths named ``{table}.{fmt}``) may
    select a subset, by default all of them under ``results/…/tables/``."""
    wanted, by_table = select_outputs(table_paths(Layout(study.results_dir).tables), outputs, "table")
    st = load_stats_tables(study, inputs)
    with StageLog(log) as out:
        for name, paths in by_table.items():
            table = BUILDERS[name](st)
            write_table(table, paths)
            checkpoint("tables.table")
            out.line(f"table {name}: {len(table.rows)} rows → {', '.join(str(p) for p in paths)}")
    return wanted


def render_table(study: Study, name: str, inputs: Files | None = None) -> str:
    """One table as Markdown, built from the study's statistics (for printing)."""
    if name not in BUILDERS:
        raise UserError(f"--print: {name!r} is not a table of this pipeline; choose from: {', '.join(TABLES)}")
    return to_markdown(BUILDERS[name](load_stats_tables(study, inputs)))
