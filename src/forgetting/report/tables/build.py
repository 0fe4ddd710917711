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
``cache_validation``   per configuration incl. the baseline and pricing profile: the reconstructed
                       cached share against the server-reported one, their gap with a paired CI,
                       the cost priced both ways, the prompt check
=====================  ==========================================================================

Each table is a declaration (:class:`~forgetting.report.tables.columns.Spec`: its columns, each saying
what it shows and what it writes to the CSV), the rows it lists and its notes.

Configurations beyond the paper's 42 appear in every table; their *Timing* cell holds a
short label of their policy (``batched ×4 · delayed``, ``keep 8``; :func:`policy_label`).

Marks: ``*`` the CI (at ``statistics.confidence``) excludes the null (0 for differences, 1 for
ratios); ``†`` also significant after Holm–Bonferroni over the table's families
(``statistics.holm_family``). Every column of a row is computed on one set of tasks (for an
evaluation: those it and its baseline both have), and every note is generated from the settings
the numbers were computed with (:mod:`forgetting.report.tables.notes`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import forgetting.report.tables.format as fmt
from forgetting.grid import PAPER_NAMES
from forgetting.report.stats.labels import SCOPE_LABELS, agent_label, amount_label, is_paper_like, policy_label
from forgetting.report.tables.columns import Column, Estimate, Holm, Row, Spec
from forgetting.report.tables.notes import (
    bootstrap_note,
    ci_header,
    cost_statistic_text,
    eval_errors_note,
    fewer_tasks_note,
    median_note,
    percent,
    pricing_text,
    profiles_text,
    prompt_check_note,
    refetch_rate_text,
    resamples_note,
    unreported_note,
)
from forgetting.report.tables.stats_tables import StatsTables
from forgetting.report.tables.writers import Table

TABLES: tuple[str, ...] = (
    "table1",
    "table2",
    "table2_immediate",
    "refetch",
    "cost_breakdown",
    "comparisons",
    "policies_comparison",
    "cache_validation",
)
#: every table is written in each format; HTML is what the Snakemake report shows inline
FORMATS: tuple[str, ...] = ("csv", "md", "tex", "html")


def _percent(share: Any) -> str:
    return fmt.number(share * 100, 0)


def _rate(rate: Any) -> str:
    return fmt.number(rate, 3)


# the columns that say which configuration a row is
AGENT = Column("agent", "Agent", data="agent", show=agent_label)
SCOPE = Column("scope", "Scope", data="scope", show=lambda s: SCOPE_LABELS.get(s, s or ""))
GRANULARITY = Column("granularity", "Granularity", data="granularity", show=lambda g: g or "")
AMOUNT = Column("amount", "Amount %", data="amount", show=amount_label, align="r")
IDENTITY = (
    AGENT,
    Column(data="configuration"),
    Column("timing", "Timing", data="timing", cell=lambda r: policy_label(r["configuration"], r)),
    SCOPE,
    GRANULARITY,
    AMOUNT,
)
SOLVED = Column("solved", "Solved", data="tasks_solved", show=fmt.count, align="r")
DELTA_SOLVED = Estimate("delta", "Δ solved", "tasks_solved", data="delta_solved", ci=True, digits=1, signed=True)
N_TASKS = Column(data="n_tasks")


def by_timing(row: Row) -> str:
    """Row groups of an agent's baseline and evaluations: one per timing (or policy)."""
    return f"{row['agent']}/{row.get('timing') or row['configuration']}"


def _notes(
    st: StatsTables,
    holm: Holm | None,
    extra: Sequence[str] = (),
    detail: Callable[[Mapping[str, Any]], str] | None = None,
    *,
    intervals: bool = True,
) -> list[str]:
    """The notes every table carries, then the table's own (``extra``); ``detail`` adds to each
    row named as computed on fewer tasks. A table without ``intervals`` says so where the others
    describe their bootstrap."""
    rows = [st.summary[k] for k in st.summary_order]
    notes = [bootstrap_note(st.settings, st.n_tasks) if intervals else NO_INTERVALS_NOTE]
    if holm is not None:
        notes.extend(holm.notes())
    notes.extend(extra)
    errors = eval_errors_note(st.settings, rows)
    if errors:
        notes.append(errors)
    if any(r["configuration"] != "baseline" and not is_paper_like(r) for r in rows):
        notes.append(
            "Configurations beyond the paper's grid show their policy in the Timing column "
            "(config/README.md, policies beyond the paper)."
        )
    fewer = fewer_tasks_note(rows, st.n_tasks, st.settings.on_error, detail, bootstrap=intervals)
    if fewer:
        notes.append(fewer)
    if st.provenance:
        notes.append(st.provenance)
    return notes


TABLE1 = Spec(
    "table1",
    "Table I. Tasks solved and run length per evaluation, against each agent's baseline",
    columns=(
        *IDENTITY,
        SOLVED,
        Column(data="median_turns"),  # the CSV keeps it beside tasks_solved; shown after Δ solved
        DELTA_SOLVED,
        Column("turns", "Median turns", cell=lambda r: fmt.count(r["median_turns"]), align="r"),
        Estimate("change", "Run length change", "turns", data="turns_ratio", ci=True, change=True),
        Column("capped", "Capped", data="capped", show=fmt.count, align="r"),
        Column("looping", "Looping", data="looping", show=fmt.count, align="r"),
        Column("errors", "Eval errors", data="n_eval_errors", show=fmt.count, align="r"),
        N_TASKS,
    ),
    group=by_timing,
)


def table1(st: StatsTables) -> Table:
    t, holm = TABLE1.fill(st.with_baselines(), st.settings, st.effect)
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


TABLE2 = Spec(
    "table2",
    "Table II. Estimated cost relative to the baseline, delayed deletion",
    columns=(
        *IDENTITY,
        Estimate("flat", "Flat", "cost_flat", data="cost_flat_ratio", ci=True),
        Estimate("cache", "Caching-aware", "cost_cache", data="cost_cache_ratio", ci=True),
        Estimate("input", "Input tokens", "input_tokens", data="input_tokens_ratio"),
        Estimate("output", "Output tokens", "output_tokens", data="output_tokens_ratio"),
        Estimate("per_solved", "Cost per task solved", "cost_per_solved", data="cost_per_solved_ratio"),
        N_TASKS,
    ),
    group=lambda r: f"{r['agent']}/{r.get('timing')}",
)


def _table2(st: StatsTables, spec: Spec, keep: Callable[[dict[str, Any]], bool]) -> Table:
    t, holm = spec.fill(st.evaluations(keep), st.settings, st.effect)
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
    return _table2(st, TABLE2, lambda r: r.get("timing") != "immediate")


def table2_immediate(st: StatsTables) -> Table:
    spec = dataclasses.replace(
        TABLE2,
        name="table2_immediate",
        title="Table II (immediate). Estimated cost relative to the baseline, immediate deletion",
    )
    return _table2(st, spec, lambda r: r.get("timing") == "immediate")


REFETCH = Spec(
    "refetch",
    "Re-fetching: re-fetch rate against the baseline, deleted vs kept outputs, re-fetch distance",
    columns=(
        *IDENTITY,
        Column("rate", "Re-fetch rate", data="refetch_rate", show=_rate, align="r"),
        Estimate("ratio", "Ratio", "refetch_rate", data="refetch_ratio", ci=True),
        Column("deleted", "Deleted re-fetched", data="deleted_rate", show=_rate, align="r"),
        Column("kept", "Kept re-fetched", data="kept_rate", show=_rate, align="r"),
        # undefined where a configuration deletes no read output or keeps none
        Estimate("dvk", "Deleted/kept", "deleted_vs_kept", data="deleted_vs_kept", ci=True, undefined_is_none=True),
        Estimate("distance", "Distance", "refetch_distance", data="refetch_distance", ci=True, digits=1,
                 tested=False, baseline="refetch_distance"),
        N_TASKS,
    ),
    group=by_timing,
)


def refetch(st: StatsTables) -> Table:
    t, holm = REFETCH.fill(st.with_baselines(), st.settings, st.effect)
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


#: the caching-aware cost's components: cell key, summary field, header
_COST_PARTS = (
    ("cached", "cost_cached", "Cached"),
    ("new", "cost_new", "New"),
    ("rebilled", "cost_rebilled", "Re-billed"),
    ("write", "cost_cache_write", "Cache write"),
    ("output", "cost_output", "Output"),
)


def _with_shares(row: Row, parts: Sequence[str]) -> dict[str, Any]:
    """The summary row with its total cost (of ``parts``), its ratio to the baseline's cost on the
    row's own tasks and each part's share of the total."""
    comps = {c: row.get(c) for c in parts}
    total = float("nan") if any(fmt.is_missing(v) for v in comps.values()) else float(sum(comps.values()))
    shares = {
        f"{c}_share": (float(v) / total if total else float("nan")) if not fmt.is_missing(v) else float("nan")
        for c, v in comps.items()
    }
    base_total = row.get("baseline_cost")  # on the row's own tasks (summary_mask): one task set per row
    ratio = total / float(base_total) if not fmt.is_missing(base_total) and base_total else float("nan")
    return {**row, "cost_total": total, "ratio_to_baseline": ratio, **shares}


def cost_breakdown(st: StatsTables) -> Table:
    with_write = any(
        not fmt.is_missing(r.get("cost_cache_write")) and r["cost_cache_write"] > 0
        for r in st.summary.values()
    )
    parts = [p for p in _COST_PARTS if with_write or p[0] != "write"]
    spec = Spec(
        "cost_breakdown",
        "Cost breakdown under caching-aware pricing: share of each component, per configuration",
        columns=(
            *IDENTITY,
            Column(data="pricing_profile"),
            Column("total", "Cost (USD)", data="cost_total", show=fmt.number, align="r"),
            Column("ratio", "× baseline", data="ratio_to_baseline", show=fmt.number, align="r"),
            Column(data=tuple(c for _, c, _ in parts)),
            *(Column(k, f"{h} %", data=f"{c}_share", show=_percent, align="r") for k, c, h in parts),
        ),
        group=by_timing,
    )
    fields = [c for _, c, _ in parts]
    t, _ = spec.fill([_with_shares(r, fields) for r in st.with_baselines()], st.settings, st.effect)
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
            + "). Cached: prompt prefix the profile's cache serves; new: tokens of messages new in the call; "
            f"{rebilled_text(st)} Output: generated tokens. Shares in % of the configuration's own cost.",
        ],
        intervals=False,
    )
    return t


#: the first note of a table of point values (where the others describe their bootstrap)
NO_INTERVALS_NOTE = (
    "Point values, no confidence intervals: each row's figures on the tasks of its row, nothing resampled "
    "(Table II gives the caching-aware cost ratio with its CI)."
)


def rebilled_text(st: StatsTables) -> str:
    """What re-billed means under the primary profile the costs were computed with, from the
    baselines' own re-billed cost: none under the paper's lower bound (an append-only history
    keeps every earlier prompt a prefix), some under rules that serve less of an unbroken prefix."""
    bases = [b for b in (st.baseline(a) for a in st.agents) if b is not None]
    profile = next((str(b["pricing_profile"]) for b in bases if b.get("pricing_profile")), None)
    if profile is None and st.context.pricing is not None:
        profile = st.context.pricing[0]
    named = f"profile {profile}" if profile else "the primary profile"
    head = "re-billed: content sent before but billed at the full input price again"
    shares = [
        (b, float(b["cost_rebilled"]) / total)
        for b in bases
        if not fmt.is_missing(b.get("cost_rebilled"))
        and (total := sum(float(b.get(c) or 0) for _, c, _ in _COST_PARTS))
    ]
    if not shares:
        return f"{head}, because a rewrite broke the cached prefix or {named}'s cache did not serve it."
    positive = [(b, share) for b, share in shares if float(b["cost_rebilled"]) > 0]
    if not positive:
        return (
            f"{head}, because deletion broke the cached prefix: none in the baselines under {named}, whose "
            "histories only grow, so every earlier prompt stays a prefix of the next."
        )
    rules = st.context.pricing[1] if st.context.pricing is not None and st.context.pricing[0] == profile else ()
    why = f" ({'; '.join(rules)})" if rules else ""
    listing = ", ".join(f"{agent_label(b['agent'])} {share * 100:.1f} %" for b, share in positive)
    return (
        f"{head}: because deletion broke the cached prefix, or because {named}'s cache rules{why} serve less "
        f"than the whole unbroken prefix. The baselines, which delete nothing, re-bill for the second reason "
        f"alone ({listing} of their cost), so only a configuration's re-billed share beyond its baseline's is "
        "owed to deletion."
    )


def _fixed(row: Row) -> str:
    """What a comparison holds fixed: the granularity of a timing comparison, else the timing."""
    return (row["granularity"] if row["comparison"] == "timing" else row["timing"]) or ""


COMPARISONS = Spec(
    "comparisons",
    "Paired comparisons between configurations: delayed → immediate and turn → token",
    columns=(
        AGENT,
        Column("comparison", "Comparison", data="comparison",
               show=lambda kind: "delayed → immediate" if kind == "timing" else "turn → token"),
        Column(data=("first", "second")),
        SCOPE,
        Column("fixed", "At", data=("granularity", "timing"), cell=_fixed),
        AMOUNT,
        Estimate("solved", "Δ solved", "tasks_solved", data="tasks_solved", digits=1, signed=True),
        Estimate("turns", "Δ run length ratio", "turns", data="turns", signed=True),
        Estimate("refetch", "Δ re-fetch ratio", "refetch_rate", data="refetch_rate", signed=True),
        Estimate("flat", "Δ flat cost ratio", "cost_flat", data="cost_flat", signed=True),
        Estimate("cache", "Δ caching-aware ratio", "cost_cache", data="cost_cache", signed=True),
        N_TASKS,
    ),
    group=lambda r: f"{r['agent']}/{r['comparison']}",
    family=lambda r, metric: f"{r['comparison']}/{metric}",
    unit="comparison kind within a column",
)


def comparisons(st: StatsTables) -> Table:
    by_pair: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for c in st.comparisons:
        by_pair.setdefault((c["agent"], c["first"], c["second"]), {})[c["metric"]] = c
    # a row per pair, its identity from any of the pair's metrics
    rows = [next(iter(cells.values())) for cells in by_pair.values()]
    t, holm = COMPARISONS.fill(
        rows, st.settings, lambda r, metric: by_pair[(r["agent"], r["first"], r["second"])].get(metric)
    )
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


def _rebilled_share(row: Row) -> float:
    """The share of the caching-aware cost paid for content re-billed after a broken prefix."""
    total = sum(
        float(row.get(c) or 0) for c in ("cost_cached", "cost_new", "cost_rebilled", "cost_cache_write")
    ) + float(row.get("cost_output") or 0)
    rebilled = row.get("cost_rebilled")
    return float(rebilled) / total if total and not fmt.is_missing(rebilled) else float("nan")


POLICIES = Spec(
    "policies_comparison",
    "Policies beyond the paper against the paper's delayed deletion: tasks solved and cost relative to the "
    "baseline",
    columns=(
        AGENT,
        Column("configuration", "Configuration", data="configuration"),
        Column(data="kind"),
        Column("policy", "Policy", data=("policy", "timing", "keep_last"),
               cell=lambda r: policy_label(r["configuration"], r)),
        SCOPE,
        GRANULARITY,
        AMOUNT,
        SOLVED,
        DELTA_SOLVED,
        Estimate("cache", "Caching-aware cost", "cost_cache", data="cost_cache_ratio", ci=True),
        Estimate("flat", "Flat cost", "cost_flat", data="cost_flat_ratio", ci=True),
        Column("rebilled", "Re-billed %", data="rebilled_share", show=_percent, align="r"),
        N_TASKS,
    ),
    group=lambda r: f"{r['agent']}/{r['kind']}",
)


def policies_comparison(st: StatsTables) -> Table:
    """The paper's delayed configurations against the policies beyond the paper, per agent:
    tasks solved and caching-aware cost against the baseline."""
    rows = []
    for agent in st.agents:
        base = st.baseline(agent)
        paper = st.evaluations(
            lambda r, a=agent: r["agent"] == a and r["configuration"] in PAPER_NAMES and r.get("timing") == "delayed"
        )
        beyond = st.evaluations(lambda r, a=agent: r["agent"] == a and _is_policy(r))
        for kind, listed in (("baseline", [base] if base else []), ("paper", paper), ("policy", beyond)):
            rows += [{**r, "kind": kind, "rebilled_share": _rebilled_share(r)} for r in listed]
    t, holm = POLICIES.fill(rows, st.settings, st.effect)
    extra = [
        "Rows: each agent's baseline, the paper's delayed configurations of this study, then every "
        "configuration beyond the paper's 42 (config/README.md, policies beyond the paper). "
        "Solved and Δ solved: on the tasks the configuration and its baseline both have; cost: "
        f"{cost_statistic_text(st.settings)}, configuration over baseline (below 1: cheaper); "
        f"caching-aware: {pricing_text(st.context)}. "
        "Re-billed: share of the caching-aware cost (summed over tasks) paid for content sent before "
        "whose cached prefix a rewrite broke.",
    ]
    if not any(r["kind"] == "policy" for r in rows):
        extra.append("This study has no configuration beyond the paper's 42.")
    t.notes = _notes(st, holm, extra)
    return t


def _share(share: Any) -> str:
    return fmt.number(share * 100, 1) if not fmt.is_missing(share) else fmt.NA


def _gap(resamples: int) -> Callable[[Row], str]:
    """The gap in percentage points with its interval (– where no call reported cached tokens)
    and, where the interval rests on fewer than all ``resamples``, how many."""
    def pp(x: Any) -> Any:
        return None if fmt.is_missing(x) else float(x) * 100

    def cell(row: Row) -> str:
        text = fmt.with_interval(pp(row["gap"]), pp(row["gap_ci_low"]), pp(row["gap_ci_high"]), 1, signed=True)
        undefined = row.get("n_undefined")
        if text == fmt.NA or fmt.is_missing(undefined):
            return text
        return text + fmt.resamples_defined(resamples - int(undefined), resamples)

    return cell


def _of(part: str, whole: str) -> Callable[[Row], str]:
    def cell(row: Row) -> str:
        return f"{int(row[part])} / {int(row[whole])}" if int(row[whole]) else fmt.NA

    return cell


def _cost_ratio(row: Row) -> str:
    rec, rep = row.get("cost_reconstructed"), row.get("cost_reported")
    if fmt.is_missing(rec) or fmt.is_missing(rep) or not rep:
        return fmt.NA
    return fmt.number(float(rec) / float(rep), 3)


def cache_validation(st: StatsTables) -> Table:
    """The reconstruction against the server, per configuration (baselines first) and profile."""
    ci, _ = ci_header(st.settings.confidence)
    spec = Spec(
        "cache_validation",
        "Cache validation: the reconstructed cached share against the one the server reported",
        columns=(
            *IDENTITY,
            Column("profile", "Profile", data="profile"),
            Column("calls", "Calls reporting", data=("reported_calls", "calls"), cell=_of("reported_calls", "calls"),
                   align="r"),
            Column("reported", "Reported cached %", data="reported_share", show=_share, align="r"),
            Column("reconstructed", "Reconstructed cached %", data="reconstructed_share", show=_share, align="r"),
            Column("cross_run", "Cross-run cached %", data="cross_run_share", show=_share, align="r"),
            Column("gap", f"Gap, pp {ci}", data=("gap", "gap_ci_low", "gap_ci_high"), cell=_gap(st.settings.resamples),
                   align="r"),
            Column(data=("n_undefined", "runs_without_reports")),
            Column("cost", "Cost rec./rep.", data=("cost_reconstructed", "cost_reported"), cell=_cost_ratio,
                   align="r"),
            Column("prompt", "Prompt mismatches", data=("prompt_mismatch_calls", "prompt_checked_calls"),
                   cell=_of("prompt_mismatch_calls", "prompt_checked_calls"), align="r"),
            Column("difference", "Server − rebuilt", data="prompt_difference_per_call",
                   show=lambda d: fmt.number(d, 1, signed=True), align="r"),
            Column(data=("runs_with_mismatch", "n_runs", "n_tasks")),
        ),
        group=lambda r: f"{r['agent']}/{r['configuration']}",
    )
    rows, first = [], []
    for summary in st.with_baselines():
        for k, profile in enumerate(st.profiles):
            v = st.validation.get((summary["agent"], summary["configuration"], profile))
            if v is None:
                continue
            row = {**summary, **v, "gap": v["estimate"], "gap_ci_low": v["ci_low"], "gap_ci_high": v["ci_high"]}
            rows.append(row)
            if k == 0:
                first.append(row)  # the prompt check and the reporting calls, once per configuration
    t, _ = spec.fill(rows, st.settings, st.effect)
    extra = [
        "Over the calls whose server reported cached tokens (Calls reporting, of all calls). Reported "
        "cached: the server's cached tokens (prompt_tokens_details.cached_tokens, prompt_cache_hit_tokens "
        "or cache_read_input_tokens) over its prompt_tokens; reconstructed: the profile's cache hits over the "
        "rebuilt prompts' tokens on the same calls; each summed over tasks of each task's mean over its runs "
        "(every analysed run). Cross-run cached: the server's cached tokens beyond the longest prefix any "
        "earlier prompt of the same run shares, over its prompt_tokens: hits no within-run reconstruction "
        "can explain (another run's blocks on the same server, docs/cost.md), left out of the gap. "
        "Gap: reconstructed − (reported − cross-run), in percentage points, with a paired bootstrap "
        "CI (both shares on the same resampled tasks); above 0 the profile expects more cache hits than the "
        "server gave. Cost rec./rep.: the profile's caching-aware cost of those calls over the same calls "
        "priced at its prices from the server's counts (cached and written tokens as reported: a server "
        "that reports no cache writes is billed none, so a profile with a write premium costs more in the "
        "reconstruction).",
    ]
    defined = [
        st.settings.resamples - int(r["n_undefined"]) for r in rows
        if not fmt.is_missing(r.get("gap")) and not fmt.is_missing(r.get("n_undefined")) and int(r["n_undefined"])
    ]
    fewer = resamples_note(st.settings, defined) if defined else None
    for note in (profiles_text(st.context), prompt_check_note(st.context, first), unreported_note(first), fewer):
        if note:
            extra.append(note)
    if not rows:
        extra.append("No run_costs rows: nothing to validate (the statistics had no run_costs dataset).")
    s = st.settings
    t.notes = [
        f"Paired bootstrap over the {st.n_tasks} tasks: {s.resamples} resamples (seed {s.seed}), "
        f"{percent(s.confidence)} % percentile CIs; a row's reported and reconstructed shares are computed on "
        "the same resampled tasks (the same resamples as every other table).",
        *extra,
    ]
    if any(r["configuration"] != "baseline" and not is_paper_like(r) for r in rows):
        t.notes.append("Configurations beyond the paper's grid show their policy in the Timing column.")
    if st.provenance:
        t.notes.append(st.provenance)
    return t


BUILDERS: dict[str, Callable[[StatsTables], Table]] = {
    "table1": table1,
    "table2": table2,
    "table2_immediate": table2_immediate,
    "refetch": refetch,
    "cost_breakdown": cost_breakdown,
    "comparisons": comparisons,
    "policies_comparison": policies_comparison,
    "cache_validation": cache_validation,
}
