"""The paper's tables from the statistics (``stats/{effects,comparisons,summary}.parquet``).

=====================  ==========================================================================
``table1``             per evaluation: tasks solved, Δ with CI, median run length change with CI,
                       capped and looping runs, evaluation errors (and each agent's baseline)
``table2``             cost ratios, flat and caching-aware, with CIs, plus input/output token and
                       cost-per-task-solved ratios — delayed configurations (and any policy
                       beyond the paper's timings), as in the paper
``table2_immediate``   the same for immediate configurations
``refetch``            re-fetch rate ratio with CI, deleted-vs-kept re-fetch ratio with CI,
                       median re-fetch distance with CI
``cost_breakdown``     caching-aware cost split into cached / new / re-billed / (cache write) /
                       output shares, per configuration incl. the baseline
``comparisons``        paired comparisons: delayed → immediate and turn → token
``policies_comparison``  the paper's delayed configurations against the policies beyond the paper:
                       tasks solved, Δ with CI, caching-aware and flat cost ratios with CIs,
                       re-billed share of the cost
=====================  ==========================================================================

Configurations beyond the paper's 42 appear in every table; their *Timing* cell holds a
short label of their policy (``batched ×4 · delayed``, ``keep 8``; :func:`policy_label`).

Marks: ``*`` the CI (at ``statistics.confidence``) excludes the null (0 for differences, 1 for
ratios); ``†`` also significant after Holm–Bonferroni over the table's families
(``statistics.holm_family``). Every column of a row is computed on one set of tasks (for an
evaluation: those it and its baseline both have), and every note is generated from the settings
the numbers were computed with (:mod:`forgetting.tables.notes`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from forgetting.grid import PAPER_NAMES
from forgetting.stats.holm import holm_adjust
from forgetting.stats.labels import SCOPE_LABELS, agent_label, amount_label, is_paper_like, policy_label
from forgetting.stats.settings import StatsSettings
from forgetting.tables import format as fmt
from forgetting.tables.notes import (
    NoteContext,
    bootstrap_note,
    ci_header,
    cost_statistic_text,
    eval_errors_note,
    fewer_tasks_note,
    holm_note,
    median_note,
    pricing_text,
    refetch_rate_text,
)
from forgetting.tables.writers import Column, Table

TABLES: tuple[str, ...] = (
    "table1",
    "table2",
    "table2_immediate",
    "refetch",
    "cost_breakdown",
    "comparisons",
    "policies_comparison",
)
#: every table is written in each format; HTML is what the Snakemake report shows inline
FORMATS: tuple[str, ...] = ("csv", "md", "tex", "html")

_ID_COLUMNS = ["agent", "configuration", "timing", "scope", "granularity", "amount"]


@dataclass(frozen=True)
class StatsTables:
    """The statistics as row dicts, looked up by (agent, configuration[, metric])."""

    effects: Mapping[tuple[str, str, str], dict[str, Any]]
    summary: Mapping[tuple[str, str], dict[str, Any]]
    summary_order: Sequence[tuple[str, str]]
    comparisons: Sequence[dict[str, Any]]
    settings: StatsSettings
    provenance: str = ""
    context: NoteContext = field(default_factory=NoteContext)
    #: the study's number of tasks (default: the most any summary row has)
    study_tasks: int | None = None

    @classmethod
    def from_tables(
        cls,
        effects: pa.Table,
        comparisons: pa.Table,
        summary: pa.Table,
        settings: StatsSettings,
        provenance: str = "",
        context: NoteContext | None = None,
        study_tasks: int | None = None,
    ) -> StatsTables:
        eff = {(r["agent"], r["configuration"], r["metric"]): r for r in effects.to_pylist()}
        summ_rows = summary.to_pylist()
        return cls(
            effects=eff,
            summary={(r["agent"], r["configuration"]): r for r in summ_rows},
            summary_order=[(r["agent"], r["configuration"]) for r in summ_rows],
            comparisons=comparisons.to_pylist(),
            settings=settings,
            provenance=provenance,
            context=context or NoteContext(),
            study_tasks=study_tasks,
        )

    @property
    def n_tasks(self) -> int:
        if self.study_tasks is not None:
            return self.study_tasks
        return max((int(r["n_tasks"]) for r in self.summary.values()), default=0)

    def ci(self) -> tuple[str, str]:
        """The ``[95 % CI]`` header suffix at the statistics' confidence (Markdown, LaTeX)."""
        return ci_header(self.settings.confidence)

    def evaluations(self, keep: Callable[[dict[str, Any]], bool] = lambda r: True) -> list[dict[str, Any]]:
        return [self.summary[k] for k in self.summary_order if k[1] != "baseline" and keep(self.summary[k])]

    @property
    def agents(self) -> list[str]:
        """The agents, in the order of the summary."""
        return list(dict.fromkeys(a for a, _ in self.summary_order))

    def agent_rows(self, agent: str) -> list[dict[str, Any]]:
        """The agent's baseline row (when there is one) followed by its evaluations."""
        base = self.baseline(agent)
        return ([base] if base else []) + self.evaluations(lambda r: r["agent"] == agent)

    def baseline(self, agent: str) -> dict[str, Any] | None:
        return self.summary.get((agent, "baseline"))


def _identity(row: Mapping[str, Any]) -> dict[str, str]:
    if row["configuration"] == "baseline":
        return {
            "agent": agent_label(row["agent"]),
            "timing": "baseline",
            "scope": "",
            "granularity": "",
            "amount": "",
        }
    return {
        "agent": agent_label(row["agent"]),
        "timing": policy_label(row["configuration"], row),
        "scope": SCOPE_LABELS.get(row["scope"], row["scope"] or ""),
        "granularity": row.get("granularity") or "",
        "amount": amount_label(row.get("amount")),
    }


def _id_data(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row.get(k) for k in _ID_COLUMNS}


_ID_COLS = [
    Column("agent", "Agent"),
    Column("timing", "Timing"),
    Column("scope", "Scope"),
    Column("granularity", "Granularity"),
    Column("amount", "Amount %", latex=r"Amount \%", align="r"),
]


class Holm:
    """Collects the p-values of one table and adjusts them per family: with
    ``statistics.holm_family: column`` each family is one ``unit`` (a column, or a comparison
    kind within a column), with ``table`` the whole table."""

    def __init__(self, table: str, settings: StatsSettings, unit: str = "column") -> None:
        self.table = table
        self.settings = settings
        self.unit = unit
        self._tests: list[tuple[str, float]] = []

    def add(self, family: str, p: Any) -> int:
        key = family if self.settings.holm_family == "column" else self.table
        self._tests.append((key, float("nan") if fmt.is_missing(p) else float(p)))
        return len(self._tests) - 1

    def resolve(self) -> tuple[list[float], list[bool]]:
        adjusted = [float("nan")] * len(self._tests)
        for family in sorted({f for f, _ in self._tests}):
            idx = [i for i, (f, _) in enumerate(self._tests) if f == family]
            adj = holm_adjust(np.array([self._tests[i][1] for i in idx]))
            for i, a in zip(idx, adj.tolist(), strict=True):
                adjusted[i] = a
        reject = [not np.isnan(a) and a < self.settings.alpha for a in adjusted]
        return adjusted, reject

    def sizes(self) -> dict[str, int]:
        """Family → the number of tests it holds (tests without a p-value do not count)."""
        out: dict[str, int] = {}
        for family, p in self._tests:
            out[family] = out.get(family, 0) + (0 if np.isnan(p) else 1)
        return {f: n for f, n in sorted(out.items()) if n}

    def note(self) -> str:
        return holm_note(self.settings, self.sizes(), self.unit, fmt.RAW_MARK, fmt.HOLM_MARK)


def _notes(
    st: StatsTables,
    holm: Holm | None,
    extra: Sequence[str] = (),
    detail: Callable[[Mapping[str, Any]], str] | None = None,
) -> list[str]:
    """The notes every table carries, then the table's own (``extra``); ``detail`` adds to each
    row named as computed on fewer tasks."""
    rows = [st.summary[k] for k in st.summary_order]
    notes = [bootstrap_note(st.settings, st.n_tasks)]
    if holm is not None:
        notes.append(holm.note())
    notes.extend(extra)
    errors = eval_errors_note(st.settings, rows)
    if errors:
        notes.append(errors)
    if any(r["configuration"] != "baseline" and not is_paper_like(r) for r in rows):
        notes.append(
            "Configurations beyond the paper's grid show their policy in the Timing column "
            "(config/README.md, policies beyond the paper)."
        )
    fewer = fewer_tasks_note(rows, st.n_tasks, st.settings.on_error, detail)
    if fewer:
        notes.append(fewer)
    if st.provenance:
        notes.append(st.provenance)
    return notes


class _Marked:
    """Defers the marks of estimate cells until Holm has seen every test of the table."""

    def __init__(self, table: Table, holm: Holm) -> None:
        self.table = table
        self.holm = holm
        self.pending: list[tuple[int, str, str, int, bool | None]] = []

    def cell(
        self,
        row_index: int,
        key: str,
        text: str,
        family: str,
        effect: Mapping[str, Any] | None,
        data_prefix: str,
    ) -> None:
        data = self.table.data[row_index]
        if effect is None:
            self.table.rows[row_index][key] = fmt.NA
            return
        test = self.holm.add(family, effect.get("p_value"))
        data[f"{data_prefix}"] = effect.get("estimate")
        data[f"{data_prefix}_ci_low"] = effect.get("ci_low")
        data[f"{data_prefix}_ci_high"] = effect.get("ci_high")
        data[f"{data_prefix}_p"] = effect.get("p_value")
        data[f"{data_prefix}_significant"] = effect.get("significant")
        self.pending.append((row_index, key, text, test, effect.get("significant")))
        self.table.rows[row_index][key] = text

    def finish(self, prefixes: Mapping[str, str]) -> None:
        adjusted, reject = self.holm.resolve()
        for row_index, key, text, test, raw in self.pending:
            holm_sig = bool(raw is True and reject[test])
            self.table.rows[row_index][key] = text + fmt.marks(raw, holm_sig) if text != fmt.NA else text
            prefix = prefixes[key]
            self.table.data[row_index][f"{prefix}_p_holm"] = adjusted[test]
            self.table.data[row_index][f"{prefix}_significant_holm"] = holm_sig if raw is not None else None


def _metric_columns(prefix: str) -> list[str]:
    return [
        prefix,
        f"{prefix}_ci_low",
        f"{prefix}_ci_high",
        f"{prefix}_p",
        f"{prefix}_significant",
        f"{prefix}_p_holm",
        f"{prefix}_significant_holm",
    ]


def table1(st: StatsTables) -> Table:
    ci, ci_tex = st.ci()
    t = Table(
        name="table1",
        title="Table I. Tasks solved and run length per evaluation, against each agent's baseline",
        columns=[
            *_ID_COLS,
            Column("solved", "Solved", align="r"),
            Column("delta", f"Δ solved {ci}", latex=rf"$\Delta$ solved {ci_tex}", align="r"),
            Column("turns", "Median turns", align="r"),
            Column("change", f"Run length change {ci}", latex=f"Run length change {ci_tex}", align="r"),
            Column("capped", "Capped", align="r"),
            Column("looping", "Looping", align="r"),
            Column("errors", "Eval errors", align="r"),
        ],
        data_columns=[
            *_ID_COLUMNS,
            "tasks_solved",
            "median_turns",
            *_metric_columns("delta_solved"),
            *_metric_columns("turns_ratio"),
            "capped",
            "looping",
            "n_eval_errors",
            "n_tasks",
        ],
    )
    holm = Holm("table1", st.settings)
    marked = _Marked(t, holm)
    for agent in st.agents:
        for r in st.agent_rows(agent):
            data = {
                **_id_data(r),
                "tasks_solved": r["tasks_solved"],
                "median_turns": r["median_turns"],
                "capped": r["capped"],
                "looping": r["looping"],
                "n_eval_errors": r["n_eval_errors"],
                "n_tasks": r["n_tasks"],
            }
            display = {
                **_identity(r),
                "solved": fmt.count(r["tasks_solved"]),
                "turns": fmt.count(r["median_turns"]),
                "capped": fmt.count(r["capped"]),
                "looping": fmt.count(r["looping"]),
                "errors": fmt.count(r["n_eval_errors"]),
            }
            t.add(display, data, group=f"{agent}/{r.get('timing') or r['configuration']}")
            i = len(t.rows) - 1
            if r["configuration"] == "baseline":
                t.rows[i]["delta"] = t.rows[i]["change"] = ""
                continue
            d = st.effects.get((agent, r["configuration"], "tasks_solved"))
            marked.cell(
                i,
                "delta",
                fmt.with_interval(d["estimate"], d["ci_low"], d["ci_high"], 1, signed=True) if d else fmt.NA,
                "tasks_solved",
                d,
                "delta_solved",
            )
            q = st.effects.get((agent, r["configuration"], "turns"))
            marked.cell(
                i,
                "change",
                fmt.percent_change(q["estimate"], q["ci_low"], q["ci_high"]) if q else fmt.NA,
                "turns",
                q,
                "turns_ratio",
            )
    marked.finish({"delta": "delta_solved", "change": "turns_ratio"})
    c = st.context
    cap = f" ({c.turn_cap} model calls)" if c.turn_cap is not None else ""
    on_error = {
        "fail": "any stops the statistics",
        "exclude": "their tasks are excluded",
        "unresolved": "they count as not solved",
    }[st.settings.on_error]
    t.notes = _notes(
        st,
        holm,
        [
            "Solved: tasks solved, on the tasks the row's Δ compares (baseline: on its own tasks). "
            "Run length change: median turns over the baseline's, minus 1. "
            f"Capped: runs that reached the turn cap{cap}; looping: runs with {c.looping_window} identical tool "
            "calls in a row. Solved, capped and looping add each task's mean over its repeats (the "
            "baseline's: a mean per repeat).",
            median_note(st.settings),
            "Eval errors: the row's runs whose evaluation gave no verdict (timeout or harness error); "
            f"evaluation.on_error: {st.settings.on_error} ({on_error}).",
        ],
        detail=lambda r: _baseline_solved_on_its_tasks(st, r),
    )
    return t


def _baseline_solved_on_its_tasks(st: StatsTables, row: Mapping[str, Any]) -> str:
    """For an evaluation on fewer tasks: what the baseline solves on those same tasks."""
    if row["configuration"] == "baseline":
        return ""
    e = st.effects.get((row["agent"], row["configuration"], "tasks_solved"))
    if e is None or fmt.is_missing(e.get("reference")):
        return ""
    return f"the baseline solves {fmt.count(e['reference'])} of them"


def _ratio_cell(e: Mapping[str, Any] | None) -> str:
    return fmt.with_interval(e["estimate"], e["ci_low"], e["ci_high"], 2) if e else fmt.NA


def _table2(st: StatsTables, name: str, title: str, keep: Callable[[dict[str, Any]], bool]) -> Table:
    ci, ci_tex = st.ci()
    metrics = [
        ("flat", "cost_flat", f"Flat {ci}", f"Flat {ci_tex}"),
        ("cache", "cost_cache", f"Caching-aware {ci}", f"Caching-aware {ci_tex}"),
        ("input", "input_tokens", "Input tokens", None),
        ("output", "output_tokens", "Output tokens", None),
        ("per_solved", "cost_per_solved", "Cost per task solved", None),
    ]
    t = Table(
        name=name,
        title=title,
        columns=[*_ID_COLS, *[Column(k, h, latex=lt, align="r") for k, _, h, lt in metrics]],
        data_columns=[
            *_ID_COLUMNS,
            *[c for _, m, _, _ in metrics for c in _metric_columns(f"{m}_ratio")],
            "n_tasks",
        ],
    )
    holm = Holm(name, st.settings)
    marked = _Marked(t, holm)
    for r in st.evaluations(keep):
        t.add(_identity(r), {**_id_data(r), "n_tasks": r["n_tasks"]}, group=f"{r['agent']}/{r.get('timing')}")
        i = len(t.rows) - 1
        for key, metric, _, _ in metrics:
            e = st.effects.get((r["agent"], r["configuration"], metric))
            marked.cell(i, key, _ratio_cell(e), metric, e, f"{metric}_ratio")
    marked.finish({k: f"{m}_ratio" for k, m, _, _ in metrics})
    t.notes = _notes(
        st,
        holm,
        [
            "Ratios to the uncompressed baseline of the same agent (below 1: cheaper); token and cost "
            f"columns are {cost_statistic_text(st.settings)}. Flat: every input token at the input price; "
            f"caching-aware: {pricing_text(st.context)}. Cost per task solved: total caching-aware cost / "
            "tasks solved, over the baseline's (always totals).",
        ],
    )
    return t


def table2(st: StatsTables) -> Table:
    return _table2(
        st,
        "table2",
        "Table II. Estimated cost relative to the baseline, delayed deletion",
        lambda r: r.get("timing") != "immediate",
    )


def table2_immediate(st: StatsTables) -> Table:
    return _table2(
        st,
        "table2_immediate",
        "Table II (immediate). Estimated cost relative to the baseline, immediate deletion",
        lambda r: r.get("timing") == "immediate",
    )


def refetch(st: StatsTables) -> Table:
    ci, ci_tex = st.ci()
    t = Table(
        name="refetch",
        title="Re-fetching: re-fetch rate against the baseline, deleted vs kept outputs, re-fetch distance",
        columns=[
            *_ID_COLS,
            Column("rate", "Re-fetch rate", align="r"),
            Column("ratio", f"Ratio {ci}", latex=f"Ratio {ci_tex}", align="r"),
            Column("deleted", "Deleted re-fetched", align="r"),
            Column("kept", "Kept re-fetched", align="r"),
            Column("dvk", f"Deleted/kept {ci}", latex=f"Deleted/kept {ci_tex}", align="r"),
            Column("distance", f"Distance {ci}", latex=f"Distance {ci_tex}", align="r"),
        ],
        data_columns=[
            *_ID_COLUMNS,
            "refetch_rate",
            *_metric_columns("refetch_ratio"),
            "deleted_rate",
            "kept_rate",
            *_metric_columns("deleted_vs_kept"),
            "refetch_distance",
            "refetch_distance_ci_low",
            "refetch_distance_ci_high",
            "n_tasks",
        ],
    )
    holm = Holm("refetch", st.settings)
    marked = _Marked(t, holm)
    for agent in st.agents:
        for r in st.agent_rows(agent):
            data = {
                **_id_data(r),
                "refetch_rate": r["refetch_rate"],
                "deleted_rate": r["deleted_rate"],
                "kept_rate": r["kept_rate"],
                "n_tasks": r["n_tasks"],
            }
            display = {
                **_identity(r),
                "rate": fmt.number(r["refetch_rate"], 3),
                "deleted": fmt.number(r["deleted_rate"], 3),
                "kept": fmt.number(r["kept_rate"], 3),
            }
            t.add(display, data, group=f"{agent}/{r.get('timing') or r['configuration']}")
            i = len(t.rows) - 1
            if r["configuration"] == "baseline":
                t.rows[i]["ratio"] = t.rows[i]["dvk"] = ""
                t.rows[i]["distance"] = fmt.number(r["refetch_distance"], 1)
                t.data[i]["refetch_distance"] = r["refetch_distance"]
                continue
            e = st.effects.get((agent, r["configuration"], "refetch_rate"))
            marked.cell(i, "ratio", _ratio_cell(e), "refetch_rate", e, "refetch_ratio")
            dk = st.effects.get((agent, r["configuration"], "deleted_vs_kept"))
            if dk is not None and fmt.is_missing(dk["estimate"]):
                dk = None
            marked.cell(i, "dvk", _ratio_cell(dk), "deleted_vs_kept", dk, "deleted_vs_kept")
            dist = st.effects.get((agent, r["configuration"], "refetch_distance"))
            if dist is not None:
                t.rows[i]["distance"] = fmt.with_interval(
                    dist["estimate"], dist["ci_low"], dist["ci_high"], 1
                )
                t.data[i].update(
                    refetch_distance=dist["estimate"],
                    refetch_distance_ci_low=dist["ci_low"],
                    refetch_distance_ci_high=dist["ci_high"],
                )
            else:
                t.rows[i]["distance"] = fmt.NA
    marked.finish({"ratio": "refetch_ratio", "dvk": "deleted_vs_kept"})
    threshold = f"{st.context.refetch_threshold * 100:.10g}"
    t.notes = _notes(
        st,
        holm,
        [
            f"Re-fetch rate: {refetch_rate_text(st.settings)}; a read is a re-fetch when ≥ {threshold} % of "
            "its distinct lines were read before. Deleted/kept re-fetched: share of read outputs re-fetched "
            "among those "
            "deleted from the context and among those kept; – where a configuration deletes no read "
            "output or keeps none. "
            "Distance: median turns between a re-fetch and the earlier read it repeats (no test).",
        ],
    )
    return t


def cost_breakdown(st: StatsTables) -> Table:
    with_write = any(
        not fmt.is_missing(r.get("cost_cache_write")) and r["cost_cache_write"] > 0
        for r in st.summary.values()
    )
    parts = [
        ("cached", "cost_cached", "Cached"),
        ("new", "cost_new", "New"),
        ("rebilled", "cost_rebilled", "Re-billed"),
    ]
    if with_write:
        parts.append(("write", "cost_cache_write", "Cache write"))
    parts.append(("output", "cost_output", "Output"))
    t = Table(
        name="cost_breakdown",
        title="Cost breakdown under caching-aware pricing: share of each component, per configuration",
        columns=[
            *_ID_COLS,
            Column("total", "Cost (USD)", align="r"),
            Column("ratio", "× baseline", align="r"),
            *[Column(k, f"{h} %", latex=rf"{h} \%", align="r") for k, _, h in parts],
        ],
        data_columns=[
            *_ID_COLUMNS,
            "pricing_profile",
            "cost_total",
            "ratio_to_baseline",
            *[c for _, c, _ in parts],
            *[f"{c}_share" for _, c, _ in parts],
        ],
    )
    for agent in st.agents:
        for r in st.agent_rows(agent):
            comps = {c: r.get(c) for _, c, _ in parts}
            total = float("nan") if any(fmt.is_missing(v) for v in comps.values()) else float(sum(comps.values()))
            shares = {
                c: (float(v) / total if total else float("nan")) if not fmt.is_missing(v) else float("nan")
                for c, v in comps.items()
            }
            # the baseline's cost on the row's own tasks (summary_mask): one task set per row
            base_total = r.get("baseline_cost")
            ratio = total / float(base_total) if not fmt.is_missing(base_total) and base_total else float("nan")
            data = {
                **_id_data(r),
                "pricing_profile": r.get("pricing_profile"),
                "cost_total": total,
                "ratio_to_baseline": ratio,
                **comps,
                **{f"{c}_share": s for c, s in shares.items()},
            }
            display = {
                **_identity(r),
                "total": fmt.number(total, 2),
                "ratio": fmt.number(ratio, 2),
                **{k: fmt.number(shares[c] * 100, 0) for k, c, _ in parts},
            }
            t.add(display, data, group=f"{agent}/{r.get('timing') or r['configuration']}")
    t.notes = _notes(
        st,
        None,
        [
            f"Caching-aware: {pricing_text(st.context)}. Cost: caching-aware cost summed over "
            "tasks of each task's mean over its repeats. × baseline: that total over the baseline's on the "
            "same tasks (a ratio of totals"
            + (
                "; Table II's caching-aware column compares medians, statistics.cost_statistic: median"
                if st.settings.cost_statistic == "median"
                else ""
            )
            + "). Cached: prompt prefix shared with an earlier prompt of the run; new: tokens of "
            "messages new in the call; re-billed: content sent before but billed at the full input price "
            "again because deletion broke the prefix (none in the baseline); output: generated tokens. "
            "Shares in % of the configuration's own cost.",
        ],
    )
    return t


def comparisons(st: StatsTables) -> Table:
    metrics = [
        ("solved", "tasks_solved", "Δ solved", r"$\Delta$ solved", 1, True),
        ("turns", "turns", "Δ run length ratio", r"$\Delta$ run length ratio", 2, True),
        ("refetch", "refetch_rate", "Δ re-fetch ratio", r"$\Delta$ re-fetch ratio", 2, True),
        ("flat", "cost_flat", "Δ flat cost ratio", r"$\Delta$ flat cost ratio", 2, True),
        ("cache", "cost_cache", "Δ caching-aware ratio", r"$\Delta$ caching-aware ratio", 2, True),
    ]
    t = Table(
        name="comparisons",
        title="Paired comparisons between configurations: delayed → immediate and turn → token",
        columns=[
            Column("agent", "Agent"),
            Column("comparison", "Comparison"),
            Column("scope", "Scope"),
            Column("fixed", "At"),
            Column("amount", "Amount %", latex=r"Amount \%", align="r"),
            *[Column(k, h, latex=lt, align="r") for k, _, h, lt, _, _ in metrics],
        ],
        data_columns=[
            "agent",
            "comparison",
            "first",
            "second",
            "scope",
            "granularity",
            "timing",
            "amount",
            *[c for _, m, _, _, _, _ in metrics for c in _metric_columns(m)],
            "n_tasks",
        ],
    )
    by_pair: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for c in st.comparisons:
        by_pair.setdefault((c["agent"], c["first"], c["second"]), {})[c["metric"]] = c
    holm = Holm("comparisons", st.settings, unit="comparison kind within a column")
    marked = _Marked(t, holm)
    for (agent, first, second), cells in by_pair.items():
        any_row = next(iter(cells.values()))
        kind = any_row["comparison"]
        fixed = any_row["granularity"] if kind == "timing" else any_row["timing"]
        label = "delayed → immediate" if kind == "timing" else "turn → token"
        display = {
            "agent": agent_label(agent),
            "comparison": label,
            "scope": SCOPE_LABELS.get(any_row["scope"], any_row["scope"] or ""),
            "fixed": fixed or "",
            "amount": amount_label(any_row["amount"]),
        }
        data = {
            "agent": agent,
            "comparison": kind,
            "first": first,
            "second": second,
            "scope": any_row["scope"],
            "granularity": any_row["granularity"],
            "timing": any_row["timing"],
            "amount": any_row["amount"],
            "n_tasks": any_row["n_tasks"],
        }
        t.add(display, data, group=f"{agent}/{kind}")
        i = len(t.rows) - 1
        for key, metric, _, _, digits, signed in metrics:
            c = cells.get(metric)
            text = (
                fmt.with_interval(c["estimate"], c["ci_low"], c["ci_high"], digits, signed=signed)
                if c
                else fmt.NA
            )
            marked.cell(i, key, text, f"{kind}/{metric}", c, metric)
    prefixes = {k: m for k, m, _, _, _, _ in metrics}
    marked.finish(prefixes)
    short = sorted(
        {f"{r['agent']}: {r['first']} → {r['second']} ({int(r['n_tasks'])} tasks)"
         for r in st.comparisons if int(r["n_tasks"]) < st.n_tasks}
    )
    t.notes = _notes(
        st,
        holm,
        [
            "Each cell: the second configuration's estimate minus the first's (Δ tasks solved, or the "
            "ratio to the baseline), from the same resamples, with both configurations and the baseline "
            f"on the tasks all three have. Token and cost ratios are {cost_statistic_text(st.settings)}."
            + (f" Pairs on fewer tasks: {', '.join(short)}." if short else ""),
        ],
    )
    return t


def _is_policy(row: Mapping[str, Any]) -> bool:
    """A configuration beyond the paper's 42."""
    return row["configuration"] != "baseline" and row["configuration"] not in PAPER_NAMES


def policies_comparison(st: StatsTables) -> Table:
    """The paper's delayed configurations against the policies beyond the paper, per agent:
    tasks solved and caching-aware cost against the baseline."""
    ci, ci_tex = st.ci()
    metrics = [
        ("cache", "cost_cache", f"Caching-aware cost {ci}", f"Caching-aware cost {ci_tex}"),
        ("flat", "cost_flat", f"Flat cost {ci}", f"Flat cost {ci_tex}"),
    ]
    t = Table(
        name="policies_comparison",
        title="Policies beyond the paper against the paper's delayed deletion: tasks solved and cost "
        "relative to the baseline",
        columns=[
            Column("agent", "Agent"),
            Column("configuration", "Configuration"),
            Column("policy", "Policy"),
            Column("scope", "Scope"),
            Column("granularity", "Granularity"),
            Column("amount", "Amount %", latex=r"Amount \%", align="r"),
            Column("solved", "Solved", align="r"),
            Column("delta", f"Δ solved {ci}", latex=rf"$\Delta$ solved {ci_tex}", align="r"),
            *[Column(k, h, latex=lt, align="r") for k, _, h, lt in metrics],
            Column("rebilled", "Re-billed %", latex=r"Re-billed \%", align="r"),
        ],
        data_columns=[
            "agent",
            "configuration",
            "kind",
            "policy",
            "timing",
            "keep_last",
            "scope",
            "granularity",
            "amount",
            "tasks_solved",
            *_metric_columns("delta_solved"),
            *[c for _, m, _, _ in metrics for c in _metric_columns(f"{m}_ratio")],
            "rebilled_share",
            "n_tasks",
        ],
    )
    holm = Holm("policies_comparison", st.settings)
    marked = _Marked(t, holm)
    n_policies = 0
    for agent in st.agents:
        base = st.baseline(agent)
        paper = st.evaluations(
            lambda r, a=agent: r["agent"] == a
            and r["configuration"] in PAPER_NAMES
            and r.get("timing") == "delayed"
        )
        beyond = st.evaluations(lambda r, a=agent: r["agent"] == a and _is_policy(r))
        n_policies += len(beyond)
        for kind, rows in (("baseline", [base] if base else []), ("paper", paper), ("policy", beyond)):
            for r in rows:
                total = sum(
                    float(r.get(c) or 0) for c in ("cost_cached", "cost_new", "cost_rebilled", "cost_cache_write")
                ) + float(r.get("cost_output") or 0)
                rebilled = (
                    float(r["cost_rebilled"]) / total
                    if total and not fmt.is_missing(r.get("cost_rebilled"))
                    else float("nan")
                )
                ident = _identity(r)
                display = {
                    "agent": ident["agent"],
                    "configuration": r["configuration"],
                    "policy": ident["timing"],
                    "scope": ident["scope"],
                    "granularity": ident["granularity"],
                    "amount": ident["amount"],
                    "solved": fmt.count(r["tasks_solved"]),
                    "rebilled": fmt.number(rebilled * 100, 0),
                }
                data = {
                    "agent": r["agent"],
                    "configuration": r["configuration"],
                    "kind": kind,
                    "policy": r.get("policy"),
                    "timing": r.get("timing"),
                    "keep_last": r.get("keep_last"),
                    "scope": r.get("scope"),
                    "granularity": r.get("granularity"),
                    "amount": r.get("amount"),
                    "tasks_solved": r["tasks_solved"],
                    "rebilled_share": rebilled,
                    "n_tasks": r["n_tasks"],
                }
                t.add(display, data, group=f"{agent}/{kind}")
                i = len(t.rows) - 1
                if kind == "baseline":
                    t.rows[i]["delta"] = t.rows[i]["cache"] = t.rows[i]["flat"] = ""
                    continue
                d = st.effects.get((agent, r["configuration"], "tasks_solved"))
                marked.cell(
                    i,
                    "delta",
                    fmt.with_interval(d["estimate"], d["ci_low"], d["ci_high"], 1, signed=True) if d else fmt.NA,
                    "tasks_solved",
                    d,
                    "delta_solved",
                )
                for key, metric, _, _ in metrics:
                    e = st.effects.get((agent, r["configuration"], metric))
                    marked.cell(i, key, _ratio_cell(e), metric, e, f"{metric}_ratio")
    marked.finish({"delta": "delta_solved", **{k: f"{m}_ratio" for k, m, _, _ in metrics}})
    extra = [
        "Rows: each agent's baseline, the paper's delayed configurations of this study, then every "
        "configuration beyond the paper's 42 (config/README.md, policies beyond the paper). "
        "Solved and Δ solved: on the tasks the configuration and its baseline both have; cost: "
        f"{cost_statistic_text(st.settings)}, configuration over baseline (below 1: cheaper); "
        f"caching-aware: {pricing_text(st.context)}. "
        "Re-billed: share of the caching-aware cost (summed over tasks) paid for content sent before "
        "whose cached prefix a rewrite broke.",
    ]
    if not n_policies:
        extra.append("This study has no configuration beyond the paper's 42.")
    t.notes = _notes(st, holm, extra)
    return t


BUILDERS: dict[str, Callable[[StatsTables], Table]] = {
    "table1": table1,
    "table2": table2,
    "table2_immediate": table2_immediate,
    "refetch": refetch,
    "cost_breakdown": cost_breakdown,
    "comparisons": comparisons,
    "policies_comparison": policies_comparison,
}
