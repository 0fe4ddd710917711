"""The notes under the tables, generated from the settings the numbers were computed with.

No note states a fixed choice: the bootstrap's resamples, seed and confidence, how the medians
treat repeats (``statistics.baseline_median``), what the cost ratios compare
(``statistics.cost_statistic``), the re-fetch rate (``statistics.refetch_rate``), the
Holm–Bonferroni families (``statistics.holm_family``, with their sizes as counted), what an
evaluation error counts as (``evaluation.on_error``), the analysis thresholds and the pricing
profile's cache rules all come from :class:`~forgetting.study.statistics.StatsSettings` and
:class:`NoteContext`, so a changed setting changes its note.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forgetting.foundation import config_schema
from forgetting.study.statistics import StatsSettings


def _analysis_default(key: str) -> Any:
    """A field whose default is the schema's ``analysis.<key>`` (notes of a study without one)."""
    return field(default_factory=lambda: config_schema.defaults("analysis")[key])


@dataclass(frozen=True)
class NoteContext:
    """What the notes say about the stages before the statistics (from the study's config;
    left out: the schema's defaults, and no turn cap or pricing to speak of)."""

    refetch_threshold: float = _analysis_default("refetch_threshold")
    looping_window: int = _analysis_default("looping_window")
    turn_cap: int | None = None
    #: the primary pricing profile's name and its cache rules beyond the paper's lower bound
    #: (empty: the lower bound itself); None when unknown
    pricing: tuple[str, tuple[str, ...]] | None = None
    #: every computed profile's name and cache rules, in the cost stage's order
    profile_rules: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: ``pricing.prompt_tolerance``: the prompt check's tolerance
    prompt_tolerance: float = field(default_factory=lambda: config_schema.defaults("pricing")["prompt_tolerance"])

    @classmethod
    def from_study(cls, study: Any) -> NoteContext:
        analysis, pricing = study.analysis, study.pricing
        return cls(
            refetch_threshold=analysis.refetch_threshold,
            looping_window=analysis.looping_window,
            turn_cap=analysis.turn_cap,
            pricing=(pricing.primary, cache_rules(pricing.primary_profile)),
            profile_rules=tuple((p.name, cache_rules(p)) for p in pricing.profiles),
            prompt_tolerance=pricing.prompt_tolerance,
        )


def cache_rules(profile: Any) -> tuple[str, ...]:
    """A pricing profile's departures from the paper's lower bound, as short phrases."""
    rules = []
    if getattr(profile, "increment_from_server", False):
        rules.append(f"hits from {profile.min_prefix} tokens in steps of the server's KV block as each call log "
                     f"recorded it ({profile.increment} where none was recorded)")
    elif profile.min_prefix or profile.increment != 1:
        rules.append(f"hits from {profile.min_prefix} tokens in steps of {profile.increment}")
    if profile.recompute_last_token:
        rules.append("the last token of a full hit recomputed")
    if profile.ttl_s is not None:
        rules.append(f"entries expire {profile.ttl_s:g} s after their last use")
    if profile.capacity_tokens is not None:
        rules.append(f"an LRU cache of {profile.capacity_tokens} tokens")
    if profile.cache_write != profile.input:
        rules.append(f"cache writes at {profile.cache_write / profile.input:.2f}× the input price"
                     if profile.input else "cache writes priced apart")
    return tuple(rules)


def percent(confidence: float) -> str:
    """``0.95`` → ``95``; ``0.975`` → ``97.5``."""
    return f"{confidence * 100:.10g}"


def ci_header(confidence: float) -> tuple[str, str]:
    """The ``[95 % CI]`` suffix of a column header: Markdown and LaTeX."""
    p = percent(confidence)
    return f"[{p} % CI]", rf"[{p}\,\% CI]"


def bootstrap_note(settings: StatsSettings, n_tasks: int) -> str:
    s = settings
    return (
        f"Paired bootstrap over the {n_tasks} tasks: {s.resamples} resamples (seed {s.seed}), "
        f"{percent(s.confidence)} % percentile CIs; each configuration and its baseline are computed on the "
        "same resampled tasks, those both have. Sums over tasks add each task's mean over its repeats."
    )


def median_note(settings: StatsSettings, what: str = "Median turns") -> str:
    """How a median over runs treats repeats (``statistics.baseline_median``)."""
    if settings.baseline_median == "pooled":
        return (
            f"{what}: the median over runs, pooling every repeat of each resampled task "
            "(the baseline's repeats each count as a run)."
        )
    return (
        f"{what}: for a set with several repeats per task (the baseline), the median over tasks of "
        "each task's mean over its repeats; otherwise the median over runs."
    )


def cost_statistic_text(settings: StatsSettings) -> str:
    """What a token or cost ratio compares (``statistics.cost_statistic``)."""
    if settings.cost_statistic == "total":
        return "ratios of totals, a total being the sum over tasks of each task's mean over its repeats"
    rule = (
        "pooling every repeat of a task"
        if settings.baseline_median == "pooled"
        else "for the baseline, the median over tasks of each task's mean over its repeats"
    )
    return f"ratios of medians over runs, {rule}"


def refetch_rate_text(settings: StatsSettings) -> str:
    if settings.refetch_rate == "pooled":
        return "re-fetches / reads, pooled over the runs, each task's counts averaged over its repeats"
    return (
        "the mean of the runs' re-fetch rates, runs without reads left out, each run weighted by "
        "1 / its task's repeats"
    )


def pricing_text(context: NoteContext) -> str:
    """Caching-aware pricing as the primary profile defines it."""
    base = "the longest prefix shared with an earlier prompt of the run at the cached price"
    if context.pricing is None:
        return f"{base}, under the primary pricing profile"
    name, rules = context.pricing
    if not rules:
        return f"{base}, pricing profile {name}: a lower bound, no expiry and no write premium"
    return f"{base}, with pricing profile {name}'s rules: {'; '.join(rules)}"


def holm_note(
    settings: StatsSettings, sizes: Mapping[str, int], unit: str, raw_mark: str, holm_mark: str
) -> str:
    """The marks and the Holm–Bonferroni families as they were formed (``sizes``: family → tests)."""
    marks = f"{raw_mark} CI excludes the null (0 for differences, 1 for ratios); "
    alpha = f"α = {settings.alpha:.2g}"
    if settings.holm_family == "table":
        family = f"all {sum(sizes.values())} tests of this table as one family ({alpha})"
    elif sizes:
        counts = sorted(set(sizes.values()))
        each = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
        tests = "test" if counts == [1] else "tests"
        families = "family" if len(sizes) == 1 else "families"
        family = f"each {unit} as its own family ({len(sizes)} {families} of {each} {tests}; {alpha})"
    else:
        family = f"each {unit} as its own family ({alpha})"
    return f"{marks}{holm_mark} also significant after Holm–Bonferroni over {family}."


def resamples_note(settings: StatsSettings, defined: Sequence[int]) -> str:
    """What a count such as ``(6511/10000)`` beside an interval means (``defined``: the counts
    of defined resamples of the cells that show one)."""
    r = settings.resamples
    fewest = min(defined)
    cells = "cell" if len(defined) == 1 else "cells"
    return (
        f"(k/{r}) beside an interval: it and the p-value rest on the k of the {r} resamples in which the "
        "statistic is defined; in the others it is undefined and left out — 0/0 (e.g. no read, no re-fetch or "
        "no deleted read output among the resampled tasks, on the configuration's side or the baseline's) or, "
        "in a paired difference, ∞ − ∞. Those resamples are not a random share of all: they are the ones "
        "whose tasks show the behaviour, so a k well below "
        f"{r} makes the interval conditional on it and the mark less reliable than its level says "
        f"({len(defined)} {cells}; the fewest: {fewest}/{r}). No count: all {r} resamples."
    )


def few_tasks_note(settings: StatsSettings, withheld: Sequence[int]) -> str:
    """Why a ``‡`` stands where a significance mark would (``withheld``: the tasks of each)."""
    n = settings.min_paired_tasks
    cells = "cell" if len(withheld) == 1 else "cells"
    tasks = sorted(set(withheld))
    on = f"{tasks[0]}" if len(tasks) == 1 else f"{tasks[0]}–{tasks[-1]}"
    return (
        f"‡ the CI excludes the null, but on fewer than {n} paired tasks (statistics.min_paired_tasks; "
        f"{len(withheld)} {cells}, on {on} tasks): no significance is claimed. A percentile bootstrap over "
        "so few tasks draws from few distinct resamples and its intervals are too narrow, so it marks "
        "far more often than its level says (docs/statistics.md, 'Too few tasks to mark'); the CSV keeps "
        "the decisions as computed."
    )


def eval_errors_note(settings: StatsSettings, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """What the evaluation errors were and what they count as (``evaluation.on_error``)."""
    hit = [r for r in rows if int(r.get("n_eval_errors") or 0)]
    if not hit:
        return None
    total = sum(int(r["n_eval_errors"]) for r in hit)
    listing = "; ".join(
        f"{r['agent']}/{r['configuration']}: {int(r['n_eval_errors'])} ({', '.join(r['eval_error_tasks'] or [])})"
        for r in hit
    )
    head = f"Evaluation errors (timeout or harness error: no verdict on the patch): {total} run(s) — {listing}."
    if settings.on_error == "exclude":
        return (
            f"{head} Excluded (evaluation.on_error: exclude): each such task is left out of both the "
            "configuration and its baseline in that evaluation's comparisons (a baseline run's task: "
            "in every comparison of its agent)."
        )
    return f"{head} Counted as not solved (evaluation.on_error: unresolved)."


def fewer_tasks_note(
    rows: Sequence[Mapping[str, Any]],
    n_tasks: int,
    on_error: str,
    detail: Callable[[Mapping[str, Any]], str] | None = None,
    *,
    bootstrap: bool = True,
) -> str | None:
    """The rows computed on fewer tasks than the study has, each with its count (and ``detail``;
    ``bootstrap``: the table has intervals, resampled on those tasks)."""
    short = [r for r in rows if int(r["n_tasks"]) < n_tasks]
    if not short:
        return None
    why = "runs missing or evaluation errors excluded" if on_error == "exclude" else "runs missing"

    def one(r: Mapping[str, Any]) -> str:
        extra = detail(r) if detail else ""
        return f"{r['agent']}/{r['configuration']} ({int(r['n_tasks'])} tasks{'; ' + extra if extra else ''})"

    listing = ", ".join(one(r) for r in short)
    return (
        f"Computed on fewer than the study's {n_tasks} tasks ({why}; every column of a row on the same "
        f"tasks, an evaluation on those it and its baseline both have): {listing}."
        + (
            " The bootstrap of such a row resamples its own K tasks (each resample K draws from those K), not "
            "all the study's tasks with the others weighing nothing."
            if bootstrap
            else ""
        )
    )


def profiles_text(context: NoteContext) -> str:
    """Each computed profile and its cache rules (the lower bound when it has none)."""
    parts = [f"{name} ({'; '.join(rules) if rules else 'every prefix cached forever: the lower bound'})"
             for name, rules in context.profile_rules]
    return "Profiles: " + ", ".join(parts) + "." if parts else ""


def prompt_check_note(context: NoteContext, rows: Sequence[Mapping[str, Any]]) -> str:
    """What the prompt check compares, with its tolerance, and where it failed (``rows``: one per
    configuration, with ``prompt_checked_calls``, ``prompt_mismatch_calls``, ``runs_with_mismatch``)."""
    tolerance = f"{context.prompt_tolerance * 100:.10g} %"
    head = (
        "Prompt mismatches: calls whose prompt as the cost stage rebuilds it (chat template applied, the "
        f"model's tokenizer) differs from the server-reported prompt_tokens by more than {tolerance} "
        "(pricing.prompt_tolerance), of the calls whose server reported prompt_tokens; Server − rebuilt: "
        "their mean difference in tokens per call (a constant one points at a fixed block, such as the tools "
        "text of the system message)."
    )
    checked = sum(int(r["prompt_checked_calls"]) for r in rows)
    if not checked:
        return head + " No server reported prompt_tokens: nothing was checked (–)."
    bad = [r for r in rows if int(r["prompt_mismatch_calls"])]
    if not bad:
        return head + f" All {checked} checked calls agree."
    listing = "; ".join(
        f"{r['agent']}/{r['configuration']}: {int(r['prompt_mismatch_calls'])} of {int(r['prompt_checked_calls'])} "
        f"calls in {int(r['runs_with_mismatch'])} runs" for r in bad
    )
    return (
        f"{head} Beyond it: {listing}. The rebuilt prompts differ from what the server counted (a chat "
        "template or tokenizer other than the served model's; docs/cost.md, 'Checked against the server'): "
        "trust no cost of those runs before that is explained. "
        + QWEN3_CODER_TOOLS_NOTE
    )


#: why the paper's model does not agree exactly (docs/cost.md, "What agreement has been shown")
QWEN3_CODER_TOOLS_NOTE = (
    "One difference is known: forgetting.prompt.chat_format writes the instructions after the tool list in "
    "fewer words than Qwen3-Coder's chat template, so against Qwen3-Coder its system block is short by "
    "about 122 tokens with mini-swe-agent's one bash tool (by another constant with Trae agent's tools); "
    "a Server − rebuilt that stays this constant along every run is that difference, anything else is not."
)


def unreported_note(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The configurations none of whose calls reported cached tokens, and those where some did not
    (``rows``: one per configuration, with ``calls``, ``reported_calls``, ``n_runs``,
    ``runs_without_reports``)."""
    none = [r for r in rows if int(r["calls"]) and not int(r["reported_calls"])]
    some = [r for r in rows if int(r["reported_calls"]) and int(r["reported_calls"]) < int(r["calls"])]
    out = []
    if none:
        runs = sum(int(r["n_runs"]) for r in none)
        listing = ", ".join(f"{r['agent']}/{r['configuration']}" for r in none)
        out.append(
            f"No call reported cached tokens in {len(none)} configuration(s), {runs} run(s): {listing}; their "
            "shares, gap and costs are – (not measured), not 0."
        )
    if some:
        listing = ", ".join(
            f"{r['agent']}/{r['configuration']} ({int(r['reported_calls'])} of {int(r['calls'])} calls; "
            f"{int(r['runs_without_reports'])} runs without)" for r in some
        )
        out.append(f"Cached tokens reported on some calls only: {listing}; the shares are over the reporting calls.")
    return " ".join(out) or None
